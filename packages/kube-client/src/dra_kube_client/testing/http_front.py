"""A real HTTP server in front of a :class:`MemoryApi`, for a process under test that is
handed a kubeconfig: each request is parsed into ``api.request`` or ``api.watch_lines``."""

from __future__ import annotations

import http.server
import json
import ssl
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from dra_kube_client.errors import KubeApiError
from dra_kube_client.testing.local_server import LocalHttpServer
from dra_kube_client.testing.memory import MemoryApi

__all__ = ["HttpFront", "serve_http"]


class HttpFront(LocalHttpServer):
    """Serves ``api`` on ``127.0.0.1`` (an ephemeral port) until :meth:`close`.

    ``authorizations`` collects every ``Authorization`` header seen (``None`` when absent);
    with ``tls`` (a server context) it serves HTTPS, and ``client_names`` collects the common
    names of the client certificates presented.
    """

    def __init__(self, api: MemoryApi, *, tls: ssl.SSLContext | None = None) -> None:
        """Start serving ``api`` in a daemon thread."""
        self.api = api
        self.authorizations: set[str] = set()
        self.client_names: set[str] = set()
        # One response per connection: a watch ends by closing it.
        super().__init__(protocol="HTTP/1.0", tls=tls)

    def close(self) -> None:
        """End open watches and stop serving."""
        self.api.close()
        super().close()

    def handle(self, h: http.server.BaseHTTPRequestHandler, method: str) -> None:
        """Parse the request into ``api.request`` or ``api.watch_lines``."""
        url = urlsplit(h.path)
        query = dict(parse_qsl(url.query))
        self.authorizations.add(str(h.headers.get("Authorization")))
        if isinstance(h.connection, ssl.SSLSocket):
            self.client_names.update(_common_names(h.connection.getpeercert()))
        try:
            body = _body(h, method, url.path)
            if method == "GET" and query.pop("watch", "") == "true":
                timeout_s = float(query.get("timeoutSeconds") or 30)
                events = self.api.watch_lines(url.path, query=query, timeout_s=timeout_s)
                return _stream(h, events)
            content_type = h.headers.get("Content-Type") or "application/json"
            answer = self.api.request(
                method, url.path, query=query, body=body, content_type=content_type
            )
        except KubeApiError as exc:
            return _send(h, exc.status or 500, status_body(exc))
        return _send(h, 201 if method == "POST" else 200, answer)


def serve_http(api: MemoryApi, *, tls: ssl.SSLContext | None = None) -> HttpFront:
    """Serve ``api`` over HTTP, or HTTPS with ``tls`` (use as a context manager, or
    :meth:`HttpFront.close`)."""
    return HttpFront(api, tls=tls)


def status_body(exc: KubeApiError) -> dict[str, Any]:
    """The ``Status`` object the API server answers an error with."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": exc.message,
        "reason": exc.reason,
        "code": exc.status or 500,
    }


def _body(h: http.server.BaseHTTPRequestHandler, method: str, path: str) -> object:
    length = int(h.headers.get("Content-Length") or 0)
    raw = h.rfile.read(length) if length else b""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError as exc:
        message = f"body is not JSON: {exc}"
        raise KubeApiError(method, path, 400, message, reason="BadRequest") from exc


def _send(h: http.server.BaseHTTPRequestHandler, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    h.send_response(status)
    h.send_header("Content-Type", "application/json")
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def _stream(h: http.server.BaseHTTPRequestHandler, events: Iterator[dict[str, Any]]) -> None:
    h.send_response(200)
    h.send_header("Content-Type", "application/json")
    h.end_headers()
    try:
        for event in events:
            h.wfile.write(json.dumps(event).encode() + b"\n")
            h.wfile.flush()
    except OSError:
        return  # the client went away


def _common_names(cert: dict[str, Any] | None) -> list[str]:
    """The subject common names of a peer certificate as :meth:`ssl.SSLSocket.getpeercert`
    gives it (nested tuples of name/value pairs)."""
    if not cert:
        return []
    return [value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"]
