"""A scripted HTTP server: a test's function answers every request.

For transport tests that need replies :class:`~dra_kube_client.testing.MemoryApi` never
gives: a watch stream cut into chunks in the middle of a line, a body that is not JSON, a
410 on a watch. Every request is recorded in :attr:`ScriptedServer.seen`.
"""

from __future__ import annotations

import http.server
import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dra_kube_client.testing.local_server import LocalHttpServer

__all__ = ["Reply", "Request", "ScriptedServer"]


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the server received it (header names in lower case)."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Reply:
    """What to answer: status, body and type; ``chunks`` (offsets into the body) sends it
    with ``Transfer-Encoding: chunked``, cut at those offsets."""

    status: int
    body: bytes
    content_type: str = "application/json"
    chunks: tuple[int, ...] | None = None

    @classmethod
    def json(cls, status: int, obj: Any, *, chunks: tuple[int, ...] | None = None) -> Reply:
        """``obj`` as JSON."""
        return cls(status, json.dumps(obj).encode(), chunks=chunks)

    @classmethod
    def lines(cls, objs: list[Any], *, chunks: tuple[int, ...]) -> Reply:
        """A watch stream: one JSON object a line, chunked at ``chunks``."""
        body = "".join(json.dumps(o) + "\n" for o in objs).encode()
        return cls(200, body, chunks=chunks)

    @classmethod
    def status_error(cls, code: int, message: str, *, reason: str = "") -> Reply:
        """A ``Status`` object, as the API server answers an error."""
        status: dict[str, Any] = {"kind": "Status", "code": code, "message": message}
        if reason:
            status["reason"] = reason
        return cls.json(code, status)


class ScriptedServer(LocalHttpServer):
    """Serves ``answer(request)`` on ``127.0.0.1`` (an ephemeral port) until :meth:`close`."""

    def __init__(self, answer: Callable[[Request], Reply]) -> None:
        """Start serving in a daemon thread."""
        self.seen: list[Request] = []
        self._answer = answer
        super().__init__(protocol="HTTP/1.1")

    def handle(self, h: http.server.BaseHTTPRequestHandler, method: str) -> None:
        """Record the request, send what ``answer`` replies."""
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        request = Request(
            method=method,
            path=h.path,
            headers={k.lower(): v for k, v in h.headers.items()},
            body=body,
        )
        self.seen.append(request)
        reply = self._answer(request)
        h.send_response(reply.status)
        h.send_header("Content-Type", reply.content_type)
        if reply.chunks is None:
            h.send_header("Content-Length", str(len(reply.body)))
            h.end_headers()
            h.wfile.write(reply.body)
            return
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        cuts = [0, *reply.chunks, len(reply.body)]
        for start, end in itertools.pairwise(cuts):
            part = reply.body[start:end]
            if part:
                h.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
        h.wfile.write(b"0\r\n\r\n")
