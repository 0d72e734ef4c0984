"""An API server that answers only ``TokenReview`` and ``SubjectAccessReview`` (for tests of
secure serving): tokens map to users, and a set of (user, path, verb) is allowed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dra_kube_client.errors import KubeApiError
from dra_kube_client.testing.mock_transport import Answer, Call, MockTransport

__all__ = ["Reviews"]


@dataclass
class Reviews:
    """Answers reviews from ``tokens`` (token -> username) and ``allowed`` (username, path,
    verb); counts the reviews it answered; ``down`` makes every review fail (503)."""

    tokens: Mapping[str, str]
    allowed: set[tuple[str, str, str]] = field(default_factory=set)
    groups: tuple[str, ...] = ("system:authenticated",)
    down: bool = False
    token_reviews: int = 0
    access_reviews: int = 0

    def transport(self) -> MockTransport:
        """A transport whose every call this server answers."""
        return MockTransport(self.answer)

    def answer(self, call: Call) -> Answer:
        """The review's answer; anything else is a 404."""
        if self.down:
            raise KubeApiError(call.method, call.path, 503, "the API server is down")
        body = call.body if isinstance(call.body, dict) else {}
        spec = body.get("spec") or {}
        if call.path == "/apis/authentication.k8s.io/v1/tokenreviews":
            self.token_reviews += 1
            user = self.tokens.get(str(spec.get("token")))
            status: dict[str, object] = {"authenticated": user is not None}
            if user is not None:
                status["user"] = {"username": user, "uid": f"uid-{user}", "groups": self.groups}
            return {**body, "status": status}
        if call.path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
            self.access_reviews += 1
            attrs = spec.get("nonResourceAttributes") or {}
            key = (str(spec.get("user")), str(attrs.get("path")), str(attrs.get("verb")))
            return {**body, "status": {"allowed": key in self.allowed}}
        raise KubeApiError(call.method, call.path, 404, "not found", reason="NotFound")
