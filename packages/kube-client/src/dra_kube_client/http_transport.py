""":class:`HttpTransport`: JSON requests and watch streams over ``urllib3`` directly, for a
:class:`~dra_kube_client.connection.Connection` (the common kubeconfig and in-cluster cases).

It exists so that a node's kubelet plugin does not import the ``kubernetes`` client (13 MB of
resident memory and half a second of start, its generated models being most of it) only to
open a TLS connection and send a bearer token. Requests behave as the client's did: the same
retries (``urllib3``'s default: three, read errors retried only for idempotent methods), a
``timeout_s`` that bounds connecting and each read, and the same typed errors.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import tempfile
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import urllib3
from urllib3.exceptions import HTTPError, InsecureRequestWarning

from dra_kube_client.connection import Connection
from dra_kube_client.errors import KubeApiError, KubeConfigError, answer_error
from dra_kube_client.live_connections import LiveConnections
from dra_kube_client.wire import decode_answer, watch_events

__all__ = ["WATCH_GRACE_S", "HttpTransport", "TokenFile"]

#: Seconds a watch request may outlive the server-side ``timeoutSeconds`` before the client
#: gives up on a silent connection.
WATCH_GRACE_S = 15
#: Bytes asked of the socket at a time while streaming a watch (``read1``: what is there).
_READ_SIZE = 65536
#: Connections kept per host: one per concurrent watch or request (informers each hold one);
#: as many as the ``kubernetes`` client keeps, so a busy controller does not drop and reopen
#: (and log) connections it would have kept before.
_POOL_SIZE = (os.cpu_count() or 2) * 5
_USER_AGENT = "dra-kube-client/python"

log = logging.getLogger(__name__)


class TokenFile:
    """A bearer token read from a file, read again whenever the file changes.

    The kubelet rotates a projected service account token by swapping the file (a new inode
    and mtime behind the ``..data`` link), so one ``stat`` per request notices the rotation
    at once, without a refresh timer.
    """

    def __init__(self, path: str) -> None:
        """Read ``path`` on first use."""
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._token = ""

    def read(self) -> str:
        """The token the file holds now.

        Raises:
            OSError: the file cannot be read.
            ValueError: the file is empty.
        """
        st = os.stat(self.path)
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            if key != self._seen:
                token = Path(self.path).read_text().strip()
                if not token:
                    raise ValueError(f"token file {self.path} is empty")
                self._seen, self._token = key, token
            return self._token


class HttpTransport:
    """:class:`~dra_kube_client.JsonTransport` for one :class:`Connection`, over ``urllib3``."""

    def __init__(self, connection: Connection, *, source: str) -> None:
        """Load the connection's TLS material and token file once.

        Raises:
            KubeConfigError: a CA, certificate, key or token file cannot be read (``source``
                names the configuration they came from).
        """
        self._server = connection.server
        self._fixed: dict[str, str] = {"Accept": "application/json", "User-Agent": _USER_AGENT}
        if connection.basic_auth is not None:
            user, password = connection.basic_auth
            self._fixed.update(urllib3.make_headers(basic_auth=f"{user}:{password}"))
        if connection.token:
            self._fixed["Authorization"] = f"Bearer {connection.token}"
        self._token_file: TokenFile | None = None
        if connection.token_file and not connection.token:
            self._token_file = TokenFile(connection.token_file)
            try:
                self._token_file.read()
            except (OSError, ValueError) as exc:
                raise KubeConfigError(source, f"tokenFile: {exc}") from exc
        pool_kw: dict[str, Any] = {"maxsize": _POOL_SIZE}
        if connection.server.startswith("https:"):
            pool_kw["ssl_context"] = _tls_context(connection, source)
            if connection.tls_server_name:
                pool_kw["server_hostname"] = connection.tls_server_name
            if connection.insecure:
                pool_kw["cert_reqs"] = "CERT_NONE"
                pool_kw["assert_hostname"] = False
                # Said once here rather than by urllib3 on every request: the kubeconfig
                # asked for it.
                log.warning(
                    "the API server's certificate is not verified (insecure-skip-tls-verify)",
                    extra={"event": "tls_unverified", "source": source, "server": self._server},
                )
                warnings.filterwarnings("ignore", category=InsecureRequestWarning)
        self._pool = urllib3.PoolManager(**pool_kw)
        self._live = LiveConnections(self._server)
        self._live.install(self._pool)

    @property
    def server(self) -> str:
        """The API server's address, as the configuration names it (for error messages)."""
        return self._server

    def close(self) -> None:
        """Close every connection, those in use too: a request or watch in flight fails at
        once (status 0), as does every later one."""
        self._live.abort()
        self._pool.clear()

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
        """Send one request and return the decoded JSON object.

        Raises:
            KubeApiError: a transport failure (status 0) or a non-2xx answer.
        """
        data = None if body is None else json.dumps(body).encode()
        headers = self._headers(method, path, content_type if data is not None else None)
        try:
            response = self._pool.request(
                method,
                self._url(path, query),
                body=data,
                headers=headers,
                timeout=urllib3.Timeout(total=timeout_s),
            )
        except (HTTPError, OSError) as exc:  # refused, TLS, timed out: the server is unreachable
            raise KubeApiError(method, path, 0, str(exc)) from exc
        return decode_answer(method, path, response.status, response.data)

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Stream watch events (``{"type": ..., "object": ...}``) until the server ends it.

        The server closes the stream after ``timeoutSeconds`` (``timeout_s`` unless the query
        names it); the client gives up on a read silent for ``WATCH_GRACE_S`` more.

        Raises:
            KubeApiError: the watch could not be opened, broke, or sent a line that is not JSON
                (method ``WATCH``).
        """
        params = dict(query)
        params["watch"] = "true"
        params.setdefault("timeoutSeconds", str(int(timeout_s)))
        try:
            response = self._pool.request(
                "GET",
                self._url(path, params),
                headers=self._headers("WATCH", path, None),
                timeout=urllib3.Timeout(total=timeout_s + WATCH_GRACE_S),
                preload_content=False,
            )
        except (HTTPError, OSError) as exc:
            raise KubeApiError("WATCH", path, 0, str(exc)) from exc
        ended = False
        try:
            if response.status != 200:
                raise answer_error("WATCH", path, response.status, response.read())
            # read1: what has arrived, so each event is handed on as soon as its line is whole
            # (a plain read waits for a full buffer or the end of the stream).
            yield from watch_events(iter(lambda: response.read1(_READ_SIZE), b""))
            ended = True
        except ValueError as exc:
            raise KubeApiError("WATCH", path, 0, f"event is not JSON: {exc}") from exc
        except (HTTPError, OSError) as exc:
            raise KubeApiError("WATCH", path, 0, str(exc)) from exc
        finally:
            if not ended:
                # Left mid-stream (an error, or the caller stopped reading): the connection
                # still carries the rest of the watch, so it must not be reused.
                response.close()
            response.release_conn()

    def _url(self, path: str, query: Mapping[str, str] | None) -> str:
        url = self._server + path
        return url + "?" + urlencode(query) if query else url

    def _headers(self, method: str, path: str, content_type: str | None) -> dict[str, str]:
        headers = dict(self._fixed)
        if content_type:
            headers["Content-Type"] = content_type
        if self._token_file is not None:
            try:
                headers["Authorization"] = f"Bearer {self._token_file.read()}"
            except (OSError, ValueError) as exc:
                raise KubeApiError(method, path, 0, f"bearer token: {exc}") from exc
        return headers


def _tls_context(connection: Connection, source: str) -> ssl.SSLContext:
    """The client TLS context: the given CA (else the system's), the client certificate."""
    try:
        context = ssl.create_default_context(cafile=connection.ca_file, cadata=connection.ca_data)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise KubeConfigError(source, f"certificate-authority: {exc}") from exc
    if connection.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        if connection.cert_data is not None or connection.key_data is not None:
            _load_chain_data(context, connection.cert_data, connection.key_data)
        elif connection.cert_file is not None:
            context.load_cert_chain(connection.cert_file, connection.key_file)
    except (OSError, ValueError) as exc:
        raise KubeConfigError(source, f"client certificate and key: {exc}") from exc
    return context


def _load_chain_data(context: ssl.SSLContext, cert: bytes | None, key: bytes | None) -> None:
    # load_cert_chain reads files only: a private directory that is gone once loaded.
    if cert is None or key is None:
        raise ValueError("client-certificate-data and client-key-data must be given together")
    with tempfile.TemporaryDirectory(prefix="dra-kube-client-") as tmp:
        cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_file.write_bytes(cert)
        key_file.write_bytes(key)
        context.load_cert_chain(str(cert_file), str(key_file))
