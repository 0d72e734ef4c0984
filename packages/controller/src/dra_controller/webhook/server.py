"""The webhook's HTTPS server: AdmissionReviews in over POST, verdicts out (the standard
library's server; each review timed into :mod:`.metrics` when the server is given them).

Paths, as NVIDIA's webhook serves them: ``POST /validate-resource-claim-parameters`` (the
ValidatingWebhookConfiguration points there) and ``GET /readyz`` (the probes).

Shutting down without refusing a review (:meth:`WebhookServer.begin_drain`): the API server
keeps keep-alive connections to a pod after its endpoint is removed, and a POST sent on a
connection the server closes at that moment fails (Go does not retry it). So a draining
server still serves every request, answers ``/readyz`` 503 (the endpoint goes), and closes
each connection after its response with ``Connection: close``, which the client honours
before reusing it. The CLI stops serving after a drain period (``--shutdown-delay``).

Idle keep-alive connections are closed by the client, not here: :data:`CONNECTION_TIMEOUT_S`
is longer than the API server keeps one idle (90 s), because a close from this side can cross
a review the client is just sending on that connection, and that review fails.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socket import IPPROTO_TCP, TCP_NODELAY, socket
from typing import Any, Final

from .admission import DEFAULT_GATES, AdmissionReviewError, review
from .metrics import OTHER_KIND, ReviewMetrics, reviewed_kind
from .tls import ReloadingCertificate

__all__ = [
    "CONNECTION_TIMEOUT_S",
    "MAX_BODY_BYTES",
    "READYZ_PATH",
    "VALIDATE_PATH",
    "WebhookServer",
]

VALIDATE_PATH: Final = "/validate-resource-claim-parameters"
READYZ_PATH: Final = "/readyz"
#: An AdmissionReview holds the object and, on UPDATE, the old one: objects are at most
#: about 1.5 MiB in etcd, so a few MiB bound a legitimate request.
MAX_BODY_BYTES: Final = 8 * 1024 * 1024
#: Seconds a connection may stay idle or stall (the TLS handshake included): above the API
#: server's idle timeout for webhook connections (90 s), see the module docstring. A client
#: that stalls holds one thread that long.
CONNECTION_TIMEOUT_S: Final = 120

_log = logging.getLogger(__name__)


class _Handler(BaseHTTPRequestHandler):
    server_version = "dra-webhook"
    # Keep-alive: the API server reuses its connection instead of a TLS handshake per call.
    protocol_version = "HTTP/1.1"
    timeout = CONNECTION_TIMEOUT_S
    # A buffered writer: the status line, headers and body leave in one write (flushed after
    # each request). Unbuffered, the body followed the headers as a second small TLS record,
    # which Nagle's algorithm held until the client's delayed ACK of the first: 40 ms a
    # review on a kept-alive connection.
    wbufsize = -1

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] == READYZ_PATH:
            if self._draining():
                self._reply(
                    HTTPStatus.SERVICE_UNAVAILABLE, b"draining\n", "text/plain; charset=utf-8"
                )
            else:
                self._reply(HTTPStatus.OK, b"ok\n", "text/plain; charset=utf-8")
        else:
            self._error(HTTPStatus.NOT_FOUND, "not found")

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != VALIDATE_PATH:
            self._error(HTTPStatus.NOT_FOUND, "not found")
            return
        server = self.server
        assert isinstance(server, WebhookServer)
        # The span of dra_webhook_review_duration_seconds (see .metrics): the headers are
        # read, the body is not yet; it ends once the response is flushed into the socket.
        started = time.perf_counter()
        kind, outcome = OTHER_KIND, "error"
        try:
            kind, outcome = self._review(server)
            self.wfile.flush()
        finally:
            if server.metrics is not None:
                server.metrics.observe(kind, outcome, time.perf_counter() - started)

    def _review(self, server: WebhookServer) -> tuple[str, str]:
        """Read, judge and answer one review; return its ``kind`` and ``outcome`` labels."""
        content_type = self.headers.get("Content-Type", "").split(";", 1)[0].strip()
        if content_type != "application/json":
            self._error(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                f"contentType={content_type!r}, expected application/json",
            )
            return OTHER_KIND, "error"
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self._error(HTTPStatus.LENGTH_REQUIRED, "Content-Length required")
            return OTHER_KIND, "error"
        if not 0 <= length <= MAX_BODY_BYTES:
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY_BYTES} bytes")
            return OTHER_KIND, "error"
        try:
            body = json.loads(self.rfile.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            self._error(HTTPStatus.BAD_REQUEST, f"body is not JSON: {exc}")
            return OTHER_KIND, "error"
        kind = reviewed_kind(body)
        try:
            answer = review(body, gates=server.gates)
        except AdmissionReviewError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
            return kind, "error"
        self._log_verdict(answer["response"])
        self._reply(HTTPStatus.OK, json.dumps(answer).encode(), "application/json")
        return kind, "allowed" if answer["response"]["allowed"] else "denied"

    def _log_verdict(self, response: dict[str, Any]) -> None:
        if response["allowed"]:
            _log.debug("admitted request %s", response["uid"])
        else:
            _log.info("denied request %s: %s", response["uid"], response["status"]["message"])

    def _error(self, status: HTTPStatus, message: str) -> None:
        _log.warning("%s %s: %s", self.command, self.path, message)
        # The body may be unread: the connection cannot carry another request.
        self.close_connection = True
        self._reply(status, (message + "\n").encode(), "text/plain; charset=utf-8")

    def _draining(self) -> bool:
        server = self.server
        return isinstance(server, WebhookServer) and server.draining.is_set()

    def _reply(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if self._draining():
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s " + format, self.address_string(), *args)


class WebhookServer(ThreadingHTTPServer):
    """Serves the webhook on ``(host, port)``; HTTPS when a certificate is given.

    Each accepted connection is wrapped with the certificate's context *of that moment*: a
    :class:`~.tls.ReloadingCertificate` that swapped its pair serves the new one from the
    next connection on, while open connections keep the one they shook hands with. The TLS
    handshake runs in the request's thread (not in ``accept``), so a client that stalls it
    cannot block the others. Port 0 picks a free port (see ``server_address``). ``gates``
    are the driver's effective feature gates every verdict follows (NVIDIA's defaults if
    not given). With ``metrics``, each POST to the validate path is observed in them.
    """

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        tls: ReloadingCertificate | ssl.SSLContext | None = None,
        gates: Mapping[str, bool] = DEFAULT_GATES,
        metrics: ReviewMetrics | None = None,
    ) -> None:
        """Bind the listening socket; serve TLS with ``tls`` when set."""
        super().__init__(address, _Handler)
        self._tls = tls
        self.gates = gates
        self.metrics = metrics
        self.draining = threading.Event()

    def begin_drain(self) -> None:
        """Keep serving, but fail readiness and close each connection after its response
        (see the module docstring); :meth:`shutdown` ends serving later."""
        self.draining.set()

    def get_request(self) -> tuple[socket, Any]:
        """Accept one connection, wrapped with the current TLS context (no handshake yet)."""
        conn, client = self.socket.accept()
        # As Go's servers do: a response is never held back for an ACK (see _Handler).
        conn.setsockopt(IPPROTO_TCP, TCP_NODELAY, 1)
        if self._tls is None:
            return conn, client
        context = self._tls.context if isinstance(self._tls, ReloadingCertificate) else self._tls
        try:
            wrapped = context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
        except OSError:
            conn.close()
            raise
        return wrapped, client

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self.server_address[1])
