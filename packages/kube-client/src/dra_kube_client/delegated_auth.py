"""Delegated authentication and authorization, as the kube components' secure serving does.

A request's bearer token is sent to the API server in a ``TokenReview``; the user it names is
then checked with a ``SubjectAccessReview`` for the request's non-resource path and verb (for
``/metrics``: ``get``, which the ``system:monitoring`` ClusterRole and the chart's metrics
reader role grant). The answer is a :class:`Decision`: 401 without a token or with one the API
server does not accept, 403 for a user not allowed, 200 otherwise.

Results are cached for a short time (10 s, as the delegating authenticator and authorizer of
``k8s.io/apiserver`` do) so that Prometheus scraping every few seconds does not send two reviews
per scrape. Failed reviews (the API server unreachable) are never cached: the next request asks
again. Tokens are cached by their SHA-256, never in the clear.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Generic, TypeVar

from dra_kube_client.errors import KubeClientError
from dra_kube_client.transport import JsonTransport

__all__ = ["Decision", "DelegatedAuth", "User", "bearer_token"]

log = logging.getLogger(__name__)

_TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class User:
    """The user a ``TokenReview`` names (what a ``SubjectAccessReview`` asks about)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer for one request: ``status`` 200, 401, 403 or 500 and why (for the body)."""

    status: HTTPStatus
    reason: str
    user: User | None = None

    @property
    def allowed(self) -> bool:
        """Whether the request may be served."""
        return self.status == HTTPStatus.OK


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (None without one)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


@dataclass
class _TtlCache(Generic[K, V]):
    """A bounded map whose entries expire ``ttl_s`` after they were put (oldest evicted)."""

    ttl_s: float
    clock: Callable[[], float]
    max_entries: int = 4096
    _items: OrderedDict[K, tuple[float, V]] = field(default_factory=OrderedDict)

    def get(self, key: K) -> tuple[V] | None:
        """``(value,)`` while ``key`` has a fresh entry (a box: the value may be None)."""
        entry = self._items.get(key)
        if entry is None:
            return None
        if entry[0] <= self.clock():
            del self._items[key]
            return None
        return (entry[1],)

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``ttl_s`` from now (0: not at all)."""
        if self.ttl_s <= 0:
            return
        self._items.pop(key, None)
        self._items[key] = (self.clock() + self.ttl_s, value)
        # Random tokens must not grow the cache without bound: drop the oldest.
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)


class DelegatedAuth:
    """Checks requests with ``TokenReview`` and ``SubjectAccessReview`` through ``transport``.

    ``ttl_s`` is how long a review's result is reused (0: never); ``clock`` measures it
    (tests pass a fake one). Safe to call from many server threads at once.
    """

    def __init__(
        self,
        transport: JsonTransport,
        *,
        ttl_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Review through ``transport``; reuse each result for ``ttl_s`` seconds."""
        self._transport = transport
        self._lock = threading.Lock()
        self._users: _TtlCache[str, User | None] = _TtlCache(ttl_s, clock)
        self._access: _TtlCache[tuple[User, str, str], bool] = _TtlCache(ttl_s, clock)

    def check(self, authorization: str | None, *, path: str, verb: str = "get") -> Decision:
        """Authenticate the ``Authorization`` header, then authorize ``verb`` on ``path``."""
        token = bearer_token(authorization)
        if token is None:
            return Decision(HTTPStatus.UNAUTHORIZED, "a bearer token is required")
        try:
            user = self._authenticate(token)
        except KubeClientError as exc:
            # As kube's authenticator: a review that failed authenticates nobody.
            log.warning(
                "TokenReview failed", extra={"event": "token_review_failed", "error": str(exc)}
            )
            return Decision(HTTPStatus.UNAUTHORIZED, "the token could not be reviewed")
        if user is None:
            return Decision(HTTPStatus.UNAUTHORIZED, "the token is not valid")
        try:
            allowed = self._authorize(user, path, verb)
        except KubeClientError as exc:
            log.warning(
                "SubjectAccessReview failed",
                extra={"event": "access_review_failed", "error": str(exc), "user": user.name},
            )
            return Decision(HTTPStatus.INTERNAL_SERVER_ERROR, "authorization failed", user)
        if not allowed:
            return Decision(
                HTTPStatus.FORBIDDEN,
                f'user "{user.name}" cannot {verb} path "{path}"',
                user,
            )
        return Decision(HTTPStatus.OK, "allowed", user)

    def _authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            cached = self._users.get(key)
        if cached is not None:
            return cached[0]
        answer = self._transport.request(
            "POST",
            _TOKEN_REVIEWS,
            body={
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token},
            },
        )
        user = _user_of(answer.get("status") or {})
        with self._lock:
            self._users.put(key, user)
        return user

    def _authorize(self, user: User, path: str, verb: str) -> bool:
        key = (user, path, verb)
        with self._lock:
            access = self._access.get(key)
        if access is not None:
            return access[0]
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        answer = self._transport.request(
            "POST",
            _ACCESS_REVIEWS,
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "spec": spec,
            },
        )
        allowed = bool((answer.get("status") or {}).get("allowed"))
        with self._lock:
            self._access.put(key, allowed)
        return allowed


def _user_of(status: dict[str, Any]) -> User | None:
    """The user of an authenticated ``TokenReview`` status (None when not authenticated)."""
    info = status.get("user") or {}
    if not status.get("authenticated") or not info.get("username"):
        return None
    extra = info.get("extra") or {}
    return User(
        name=str(info["username"]),
        uid=str(info.get("uid") or ""),
        groups=tuple(str(g) for g in info.get("groups") or ()),
        extra=tuple(sorted((str(k), tuple(str(x) for x in v)) for k, v in extra.items())),
    )
