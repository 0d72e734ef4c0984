"""A transport-level test double, as httpx's ``MockTransport``: a handler answers each call.

For unit tests that need one scripted answer (a discovery document, a 404, a watch stream
that ends or breaks) rather than a consistent server
(:class:`~dra_kube_client.testing.MemoryApi`) or real HTTP
(:class:`~dra_kube_client.testing.ScriptedServer`)::

    def handler(call: Call) -> Answer:
        if call.method == "WATCH":
            return [{"type": "ADDED", "object": {...}}]
        raise KubeApiError(call.method, call.path, 404, "not found", reason="NotFound")

    transport = MockTransport(handler)

Like the real transport, bodies and answers go through JSON (a body that is not JSON is
refused; the caller gets fresh objects it may change), watch streams start when iterated, and
every call is recorded in :attr:`MockTransport.calls`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Answer", "Call", "MockTransport"]

#: What a handler returns: the JSON object of a request, or the events of a watch.
Answer = Mapping[str, Any] | Iterable[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Call:
    """One call as the transport received it; ``method`` is ``WATCH`` for :meth:`watch_lines`
    (as :class:`~dra_kube_client.KubeApiError` names a failed watch)."""

    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: object = None
    content_type: str = "application/json"
    timeout_s: float = 30.0


def _json_copy(value: object) -> Any:
    """``value`` as the other side of a JSON connection sees it."""
    return json.loads(json.dumps(value))


class MockTransport:
    """:class:`~dra_kube_client.JsonTransport` whose every answer ``handler`` gives.

    The handler returns a JSON object for a request and an iterable of events for a watch,
    or raises (a :class:`~dra_kube_client.KubeApiError`, as the real transport does).
    """

    def __init__(self, handler: Callable[[Call], Answer]) -> None:
        """Answer with ``handler``."""
        self.handler = handler
        self.calls: list[Call] = []
        self.closed = False
        self._lock = threading.Lock()

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout_s: float = 30.0,
    ) -> dict[str, Any]:
        """The handler's answer to this request, as decoded JSON."""
        call = Call(
            method,
            path,
            dict(query or {}),
            None if body is None else _json_copy(body),
            content_type,
            timeout_s,
        )
        self._record(call)
        answer = self.handler(call)
        if not isinstance(answer, Mapping):
            raise TypeError(f"handler answered {method} {path} with {type(answer).__name__}")
        decoded: dict[str, Any] = _json_copy(answer)
        return decoded

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """The handler's events for this watch, from the first ``next()`` on."""
        call = Call("WATCH", path, dict(query), None, "", timeout_s)
        self._record(call)
        answer = self.handler(call)
        if isinstance(answer, Mapping):
            raise TypeError(f"handler answered WATCH {path} with one object, not events")
        for event in answer:
            decoded: dict[str, Any] = _json_copy(event)
            yield decoded

    def close(self) -> None:
        """Mark the transport closed (as the real one releases its pool)."""
        self.closed = True
