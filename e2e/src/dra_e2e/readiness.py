"""Polling helpers: wait for a component to answer while checking it is still alive."""

from __future__ import annotations

import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from dra_e2e.errors import ComponentError
from dra_e2e.process import ProcessRecord, is_running, tail


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free right now on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def tls_context(
    *, ca: Path | None, cert: Path | None = None, key: Path | None = None
) -> ssl.SSLContext:
    """Client TLS context; without ``ca`` the server certificate is not verified."""
    if ca is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key) if key else None)
    return ctx


def http_ok(url: str, *, context: ssl.SSLContext | None = None, expect: str = "ok") -> bool:
    """Whether GET ``url`` answers 200 with a body containing ``expect``."""
    try:
        with urllib.request.urlopen(url, timeout=3, context=context) as resp:
            body = resp.read().decode(errors="replace")
            return resp.status == 200 and expect in body
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return False


def wait_for(
    what: str,
    check: Callable[[], bool],
    *,
    process: ProcessRecord | None = None,
    timeout: float = 60.0,
    interval: float = 0.5,
) -> None:
    """Poll ``check`` until true; fail early (with the log tail) if ``process`` died."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return
        if process is not None and not is_running(process):
            raise ComponentError(
                process.name, f"exited while waiting for {what}", log_tail=tail(process.log)
            )
        if time.monotonic() > deadline:
            log_tail = tail(process.log) if process is not None else ""
            name = process.name if process is not None else what
            raise ComponentError(
                name, f"timed out after {timeout:.0f}s waiting for {what}", log_tail=log_tail
            )
        time.sleep(interval)
