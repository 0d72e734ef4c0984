"""Closing a transport ends its requests in flight: :class:`LiveConnections` tracks every
connection a ``urllib3`` pool manager opens, and :meth:`LiveConnections.abort` shuts their
sockets down.

``urllib3``'s own ``PoolManager.clear()`` closes only idle connections: a thread blocked
reading an answer (a slow API server, a request the server holds, a silent watch) keeps
waiting for its read timeout, 30 s for a request and minutes for a watch, and whoever joins
that thread at shutdown (``asyncio.run`` joins the default executor) waits as long. Shutting
the socket down wakes the read at once; the request then fails as a transport error
(:class:`~dra_kube_client.KubeApiError` with status 0), and every connection opened after
:meth:`~LiveConnections.abort` is refused the same way, so ``urllib3``'s retries end at once
too.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import weakref

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["LiveConnections", "TransportClosedError"]

log = logging.getLogger(__name__)


class TransportClosedError(ConnectionAbortedError):
    """A connection was asked of a transport that is closed (``server``: its address)."""

    def __init__(self, server: str) -> None:
        """Refuse a connection to ``server``."""
        super().__init__(f"transport to {server} is closed")
        self.server = server


class LiveConnections:
    """The sockets of one pool manager's connections, so that closing can end those in
    use.

    The sockets are tracked rather than the connections: a response read to the end of the
    stream (a watch, over HTTP/1.0) keeps the socket while its connection has let go of it.
    """

    def __init__(self, server: str) -> None:
        """Track connections to ``server`` (named in errors)."""
        self.server = server
        self._lock = threading.Lock()
        self._sockets: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._closed = False

    def opening(self) -> None:
        """Before a connection connects.

        Raises:
            TransportClosedError: :meth:`abort` was called (``urllib3`` treats it as a
                connection failure, an ``OSError``).
        """
        if self._closed:
            raise TransportClosedError(self.server)

    def connected(self, sock: socket.socket | None) -> None:
        """Track ``sock``, the socket a connection reads from (TLS-wrapped for HTTPS); shut it
        down at once if :meth:`abort` came while it connected."""
        if sock is None:
            return
        with self._lock:
            if not self._closed:
                self._sockets.add(sock)
                return
        _shut_down(sock)

    def abort(self) -> None:
        """Refuse new connections and shut every open one down: a read blocked on one
        returns at once (its request fails)."""
        with self._lock:
            self._closed = True
            sockets = list(self._sockets)
            self._sockets.clear()
        for sock in sockets:
            _shut_down(sock)
        if sockets:
            log.debug(
                "API connections shut down",
                extra={"event": "connections_aborted", "count": len(sockets)},
            )

    def install(self, manager: urllib3.PoolManager) -> bool:
        """Make ``manager`` open its connections through this tracker; return whether it
        could (a manager with pool classes of its own, such as a SOCKS proxy's, is left
        alone: its requests in flight then end only by their timeouts)."""
        if manager.pool_classes_by_scheme != {
            "http": HTTPConnectionPool,
            "https": HTTPSConnectionPool,
        }:
            return False
        manager.pool_classes_by_scheme = _pool_classes(self)
        return True


def _pool_classes(live: LiveConnections) -> dict[str, type[HTTPConnectionPool]]:
    """``urllib3``'s pool classes, whose connections report to ``live`` before connecting."""

    class TrackedHTTPConnection(HTTPConnection):
        def connect(self) -> None:
            live.opening()
            super().connect()
            live.connected(self.sock)

    class TrackedHTTPSConnection(HTTPSConnection):
        def connect(self) -> None:
            live.opening()
            super().connect()
            live.connected(self.sock)

    class TrackedHTTPConnectionPool(HTTPConnectionPool):
        ConnectionCls = TrackedHTTPConnection

    class TrackedHTTPSConnectionPool(HTTPSConnectionPool):
        ConnectionCls = TrackedHTTPSConnection

    return {"http": TrackedHTTPConnectionPool, "https": TrackedHTTPSConnectionPool}


def _shut_down(sock: socket.socket) -> None:
    """Shut ``sock`` down for both directions; a socket closed already is left alone (its
    descriptor is -1 then, never another file's)."""
    # The plain socket's shutdown, also for a TLS socket: ``SSLSocket.shutdown`` drops its
    # TLS state, which the thread still reading from it would trip on.
    with contextlib.suppress(OSError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
