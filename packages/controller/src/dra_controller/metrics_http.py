"""``/healthz``, ``/readyz`` and ``/metrics`` on one port, for both services: the allocation
controller's port, and the webhook's metrics port (``dra-webhook --metrics-port``).

The allocation controller serves it over HTTPS by default, where ``/metrics`` (which names
every claim) is answered only to bearer tokens the API server authenticates and allows to
``get`` it (:func:`dra_kube_client.admit`); the probes stay open, as the kube components'
always-allowed ``/healthz`` and ``/readyz``. Plain HTTP to anyone only with
``--metrics-insecure=true``. The webhook serves it in plain HTTP: its metrics are latencies,
and it holds no API credentials to check tokens with.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dra_kube_client import DelegatedAuth, admit, start_http_server
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def serve(
    address: tuple[str, int],
    *,
    registry: CollectorRegistry | Callable[[], bytes],
    ready: Callable[[], bool],
    tls: ssl.SSLContext | None = None,
    auth: DelegatedAuth | None = None,
    not_ready: bytes = b"caches not synced\n",
) -> ThreadingHTTPServer:
    """Start serving on a daemon thread; return the server (``server_address`` has the port).

    ``/metrics`` serves ``registry`` rendered on each scrape, or, given a function, the text
    it returns (the allocation controller's, which renders its per-claim families once per
    reconcile). HTTPS with ``tls``; with ``auth``, ``/metrics`` needs an allowed bearer token.
    ``/readyz`` answers 503 with ``not_ready`` while ``ready()`` is false.
    """

    render: Callable[[], bytes] = (
        partial(generate_latest, registry) if isinstance(registry, CollectorRegistry) else registry
    )

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                if not admit(self, auth):
                    return
                self._reply(HTTPStatus.OK, render(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                self._reply(HTTPStatus.OK, b"ok\n", "text/plain")
            elif path == "/readyz":
                ok = ready()
                status = HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE
                self._reply(status, b"ok\n" if ok else not_ready, "text/plain")
            else:
                self._reply(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

        def _reply(self, status: HTTPStatus, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Scrapes and probes are not logged (one line each would flood the log)."""

    return start_http_server(address, Handler, tls=tls, name="http")
