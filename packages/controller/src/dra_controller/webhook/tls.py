"""The webhook's serving certificate, reloaded when its files change (no restart).

cert-manager (or an operator) renews the certificate in its Secret; the kubelet then swaps
the Secret volume's ``..data`` symlink, so ``tls.crt`` and ``tls.key`` resolve to new files
at once. :class:`ReloadingCertificate` watches both paths (the resolved target, its inode,
size and mtime) and, on a change, loads the pair into a *new* ``SSLContext`` and swaps the
reference: the server wraps each accepted connection with :attr:`ReloadingCertificate.context`,
so new handshakes present the new certificate while open connections finish on the old one.

A pair that does not load (a half-written file, a key that does not match the certificate,
garbage) is refused: the error is logged once for that state of the files and the old pair
keeps serving. A pair caught mid-swap (the files changed while being read) is tried again at
the next check.
"""

from __future__ import annotations

import hashlib
import logging
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CertificateLoadError", "ReloadingCertificate", "tls_context"]

_log = logging.getLogger(__name__)


class CertificateLoadError(Exception):
    """The certificate/key pair at ``cert_file``/``key_file`` cannot be loaded."""

    def __init__(self, cert_file: Path, key_file: Path, reason: str) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.reason = reason
        super().__init__(f"certificate {cert_file} with key {key_file}: cannot load: {reason}")


def tls_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A server TLS context (TLS 1.2 or newer) with the PEM certificate chain and key.

    Raises:
        CertificateLoadError: a file is missing or unreadable, not PEM, or the key does not
            belong to the certificate.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(certfile=str(cert_file), keyfile=str(key_file))
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
        raise CertificateLoadError(cert_file, key_file, str(exc)) from exc
    return context


@dataclass(frozen=True, slots=True)
class _FileState:
    """What identifies one version of a file behind a (possibly symlinked) path."""

    target: str
    inode: int
    size: int
    mtime_ns: int


def _file_state(path: Path) -> _FileState | None:
    try:
        stat = path.stat()  # follows the symlinks, as the kubelet's ..data swap needs
        target = os.path.realpath(path)
    except OSError:
        return None
    return _FileState(target, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _fingerprint(cert_file: Path) -> str:
    """The SHA-256 of the certificate file (for the log: which pair is served)."""
    try:
        return hashlib.sha256(cert_file.read_bytes()).hexdigest()[:16]
    except OSError:
        return "unreadable"


class ReloadingCertificate:
    """A certificate/key pair on disk and the TLS context serving its latest good version.

    Thread-safe: :meth:`check` may run in a watcher thread while request threads read
    :attr:`context`.
    """

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        """Load the pair once.

        Raises:
            CertificateLoadError: the initial pair cannot be loaded (nothing to serve).
        """
        self.cert_file = cert_file
        self.key_file = key_file
        self._lock = threading.Lock()
        states = self._states()
        self._context = tls_context(cert_file, key_file)
        self._loaded = states
        self._refused: tuple[_FileState | None, _FileState | None] | None = None
        _log.info(
            "serving certificate %s (sha256 %s)", self.cert_file, _fingerprint(self.cert_file)
        )

    @property
    def context(self) -> ssl.SSLContext:
        """The TLS context of the latest pair that loaded (new connections use it)."""
        return self._context

    def _states(self) -> tuple[_FileState | None, _FileState | None]:
        return _file_state(self.cert_file), _file_state(self.key_file)

    def check(self) -> bool:
        """Reload the pair if its files changed since the last load; True when swapped.

        A pair that fails to load is logged (once per state of the files) and the
        current context kept.
        """
        with self._lock:
            before = self._states()
            if before in (self._loaded, self._refused):
                return False
            try:
                context = tls_context(self.cert_file, self.key_file)
            except CertificateLoadError as exc:
                if self._states() != before:
                    return False  # changed while read (a swap in progress): next check
                self._refused = before
                _log.error(
                    "certificate %s / key %s changed but cannot be loaded, keeping the "
                    "current pair: %s",
                    self.cert_file,
                    self.key_file,
                    exc.reason,
                )
                return False
            if self._states() != before:
                return False  # the pair read may mix two versions: next check
            self._context = context
            self._loaded = before
            self._refused = None
        _log.info(
            "reloaded certificate %s (sha256 %s): new connections use it",
            self.cert_file,
            _fingerprint(self.cert_file),
        )
        return True

    def watch(self, stop: threading.Event, *, interval: float) -> None:
        """Call :meth:`check` every ``interval`` seconds until ``stop`` is set."""
        while not stop.wait(interval):
            try:
                self.check()
            except Exception:
                # The watcher must outlive any surprise: the server keeps its last pair.
                _log.exception("checking certificate %s failed", self.cert_file)
