"""HTTPS serving with delegated auth for ``/metrics``, as the kube components' secure port.

:class:`ServingSecurity` is what the flags say: plain HTTP only when ``insecure`` is asked for
explicitly; otherwise HTTPS with the given certificate and key, or with a self-signed pair made
in memory at start (what kube components do without ``--tls-cert-file``; scrapers then skip
verification or pin it). :func:`start_http_server` serves a handler class on a daemon thread;
TLS handshakes run in each connection's own thread, so a slow client never stalls the others.
A handler calls :func:`admit` before it answers a protected path: the request's bearer token
goes through :class:`~dra_kube_client.delegated_auth.DelegatedAuth` (401, 403, or served).
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dra_kube_client.delegated_auth import DelegatedAuth

__all__ = [
    "ServingSecurity",
    "TlsFilesError",
    "admit",
    "self_signed_context",
    "start_http_server",
]

log = logging.getLogger(__name__)

#: Seconds a client has to finish its TLS handshake.
_HANDSHAKE_TIMEOUT_S = 10.0


class TlsFilesError(Exception):
    """The serving certificate ``cert_file`` with key ``key_file`` cannot be loaded."""

    def __init__(self, cert_file: str, key_file: str, reason: str) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        super().__init__(f"serving certificate {cert_file} with key {key_file}: {reason}")


@dataclass(frozen=True, slots=True)
class ServingSecurity:
    """How a metrics port is served: ``insecure`` (plain HTTP, nobody checked) only when asked;
    else HTTPS with ``cert_file``/``key_file`` (both or neither: self-signed)."""

    insecure: bool = False
    cert_file: str = ""
    key_file: str = ""

    def __post_init__(self) -> None:
        """Refuse a certificate without its key (or the reverse)."""
        if bool(self.cert_file) != bool(self.key_file):
            raise TlsFilesError(
                self.cert_file or "(none)", self.key_file or "(none)", "give both or neither"
            )

    def tls_context(self, host: str) -> ssl.SSLContext | None:
        """The server's TLS context (None when insecure).

        Raises:
            TlsFilesError: the given files do not load as a certificate and its key.
        """
        if self.insecure:
            return None
        if not self.cert_file:
            return self_signed_context(host)
        return _context(self.cert_file, self.key_file)


def _context(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile=cert_file, keyfile=key_file)
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise TlsFilesError(cert_file, key_file, str(exc)) from exc
    return context


def self_signed_context(host: str) -> ssl.SSLContext:
    """A TLS context with a new self-signed ECDSA P-256 certificate for ``host``, the machine's
    name, ``localhost`` and the loopback addresses, valid for a year."""
    # Imported here: only secure serving without given files needs it.
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    dns = {"localhost", socket.gethostname()}
    ips = {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
    try:
        address = ipaddress.ip_address(host)
        if not address.is_unspecified:
            ips.add(address)
    except ValueError:
        if host:
            dns.add(host)
    names: list[x509.GeneralName] = [x509.DNSName(n) for n in sorted(dns)]
    names += [x509.IPAddress(ip) for ip in sorted(ips, key=str)]
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{socket.gethostname()}@dra")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    # load_cert_chain reads files only: a private directory that is gone once loaded.
    with tempfile.TemporaryDirectory(prefix="dra-serving-") as tmp:
        cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return _context(str(cert_file), str(key_file))


class _TlsServer(ThreadingHTTPServer):
    """Wraps each accepted connection; the handshake happens in the connection's thread."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[Any], context: ssl.SSLContext):
        self.context = context
        super().__init__(address, handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        wrapped = self.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return wrapped, address

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(_HANDSHAKE_TIMEOUT_S)
        try:
            request.do_handshake()
        except (OSError, ssl.SSLError) as exc:
            # Port scanners and plain-HTTP clients: nothing to serve, nothing to alarm about.
            log.debug(
                "TLS handshake failed",
                extra={"event": "tls_handshake_failed", "error": str(exc)},
            )
            return
        request.settimeout(None)
        super().finish_request(request, client_address)


def start_http_server(
    address: tuple[str, int],
    handler: type[BaseHTTPRequestHandler],
    *,
    tls: ssl.SSLContext | None,
    name: str = "http",
) -> ThreadingHTTPServer:
    """Serve ``handler`` at ``address`` (HTTPS with ``tls``, else plain) on a daemon thread;
    ``shutdown()`` stops it. Port 0 picks a free port (``server_address`` has it)."""
    server: ThreadingHTTPServer
    if tls is None:
        server = ThreadingHTTPServer(address, handler)
        server.daemon_threads = True
    else:
        server = _TlsServer(address, handler, tls)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


def admit(handler: BaseHTTPRequestHandler, auth: DelegatedAuth | None) -> bool:
    """Whether ``handler``'s request may be answered; if not, the 401/403/500 is sent.

    ``auth`` None is insecure serving (everyone admitted). The path is the request's, without
    its query, and the verb ``get`` (what a scrape is).
    """
    if auth is None:
        return True
    path = handler.path.split("?", 1)[0]
    decision = auth.check(handler.headers.get("Authorization"), path=path, verb="get")
    if decision.allowed:
        return True
    body = f"{decision.status.phrase}: {decision.reason}\n".encode()
    handler.send_response(decision.status)
    if decision.status == 401:
        handler.send_header("WWW-Authenticate", 'Bearer realm="metrics"')
    handler.send_header("Content-Type", "text/plain; charset=utf-8")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
    return False
