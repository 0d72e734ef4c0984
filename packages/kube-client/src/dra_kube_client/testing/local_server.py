"""A local HTTP server for tests: an ephemeral port on 127.0.0.1, served in a daemon thread,
with a kubeconfig pointing at it. Subclasses say how each request is answered. For a server
in another process (a console script under test), :func:`free_port` picks its port."""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import Any, Self

__all__ = ["LocalHttpServer", "free_port", "write_kubeconfig"]


def write_kubeconfig(path: Path | str, *, url: str, token: str = "test-token") -> Path:
    """A kubeconfig at ``path`` for the server at ``url`` with a bearer ``token``, written as
    JSON (a kubeconfig may be either): a process reading it loads no YAML parser, as a
    plugin reading its pod's in-cluster configuration does not."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "test", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": token}}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "u"}}],
        "current-context": "test",
    }
    out = Path(path)
    out.write_text(json.dumps(config, indent=2))
    return out


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, for a server process a test starts with the
    port in its flags (the OS may hand it out again before the process binds it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Server(http.server.ThreadingHTTPServer):
    # A plugin under test opens several connections at once (lists, watches, writes, claim
    # reads, events); with the default backlog of 5, a loaded machine that is slow to run
    # the accepting thread drops connection attempts, and each retry of one waits longer
    # (1, 2, 4, 8... seconds): a request that seems to hang.
    request_queue_size = 128
    daemon_threads = True


class LocalHttpServer(ABC):
    """Serves until :meth:`close`; every request goes to :meth:`handle`.

    ``protocol`` is the HTTP version answered: ``HTTP/1.0`` ends each response by closing
    the connection (a watch stream that simply ends), ``HTTP/1.1`` keeps it open. With
    ``tls`` (a server context), it serves HTTPS.
    """

    def __init__(self, *, protocol: str, tls: ssl.SSLContext | None = None) -> None:
        """Start serving in a daemon thread."""
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = protocol

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read their own request logs."""

            def do_GET(self) -> None:
                server.handle(self, "GET")

            def do_POST(self) -> None:
                server.handle(self, "POST")

            def do_PUT(self) -> None:
                server.handle(self, "PUT")

            def do_PATCH(self) -> None:
                server.handle(self, "PATCH")

            def do_DELETE(self) -> None:
                server.handle(self, "DELETE")

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._tls = tls is not None
        if tls is not None:
            # The handshake happens on accept, in the serving thread: enough for tests.
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    @abstractmethod
    def handle(self, h: http.server.BaseHTTPRequestHandler, method: str) -> None:
        """Answer one request."""

    @property
    def url(self) -> str:
        """The server's base URL."""
        scheme = "https" if self._tls else "http"
        return f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    def write_kubeconfig(self, path: Path | str, *, token: str = "test-token") -> Path:
        """A kubeconfig at ``path`` pointing at this server with a bearer ``token``."""
        return write_kubeconfig(path, url=self.url, token=token)

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        """The running server."""
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """:meth:`close`."""
        self.close()
