"""The webhook reloads its certificate when the Secret volume changes, over real TLS."""

from __future__ import annotations

import http.client
import logging
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dra_controller.webhook.server import WebhookServer
from dra_controller.webhook.tls import CertificateLoadError, ReloadingCertificate
from dra_kube_client.testing import free_port
from webhook_certs import CertificateAuthority, SecretVolume, ServingPair
from webhook_support import first_answer, serving

TLS_LOGGER = "dra_controller.webhook.tls"


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.fixture
def volume(tmp_path: Path, ca: CertificateAuthority) -> tuple[SecretVolume, ServingPair]:
    vol = SecretVolume(tmp_path / "cert")
    first = ca.issue("first")
    vol.publish(cert_pem=first.cert_pem, key_pem=first.key_pem)
    return vol, first


@pytest.fixture
def certificate(volume: tuple[SecretVolume, ServingPair]) -> ReloadingCertificate:
    vol, _ = volume
    return ReloadingCertificate(vol.cert_file, vol.key_file)


@pytest.fixture
def server(certificate: ReloadingCertificate) -> Iterator[WebhookServer]:
    with serving(WebhookServer(("127.0.0.1", 0), tls=certificate)) as srv:
        yield srv


def _trusting(ca: CertificateAuthority) -> ssl.SSLContext:
    return ssl.create_default_context(cadata=ca.pem.decode())


def _served(ca: CertificateAuthority, port: int) -> bytes:
    """GET /readyz on a new connection; the DER certificate the server presented."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=_trusting(ca), timeout=10)
    try:
        conn.request("GET", "/readyz")
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, b"ok\n")
        assert isinstance(conn.sock, ssl.SSLSocket)
        der = conn.sock.getpeercert(binary_form=True)
        assert der is not None
        return der
    finally:
        conn.close()


def test_new_handshakes_get_the_rotated_pair_with_no_failed_request(
    ca: CertificateAuthority,
    volume: tuple[SecretVolume, ServingPair],
    certificate: ReloadingCertificate,
    server: WebhookServer,
) -> None:
    vol, first = volume
    second = ca.issue("second")
    # A client opened before the rotation (the API server keeps its connections alive).
    kept = http.client.HTTPSConnection("127.0.0.1", server.port, context=_trusting(ca), timeout=10)
    kept.request("GET", "/readyz")
    assert kept.getresponse().read() == b"ok\n"

    seen: list[bytes] = []
    errors: list[BaseException] = []
    rotated, done = threading.Event(), threading.Event()

    def hammer() -> None:
        # New connections throughout the swap: every one must handshake and be answered.
        after = 0
        while after < 20:
            try:
                seen.append(_served(ca, server.port))
            except BaseException as exc:  # recorded, asserted below
                errors.append(exc)
                break
            if rotated.is_set():
                after += 1
        done.set()

    thread = threading.Thread(target=hammer)
    thread.start()
    vol.publish(cert_pem=second.cert_pem, key_pem=second.key_pem)
    assert certificate.check() is True
    rotated.set()
    assert done.wait(60)
    thread.join()

    assert errors == []
    assert seen[-1] == second.der
    assert set(seen) <= {first.der, second.der}
    # Once swapped, no new connection gets the old pair again.
    assert first.der not in seen[seen.index(second.der) :]
    assert _served(ca, server.port) == second.der
    # The connection from before the rotation still works on its handshake.
    kept.request("GET", "/readyz")
    assert kept.getresponse().read() == b"ok\n"
    assert isinstance(kept.sock, ssl.SSLSocket)
    assert kept.sock.getpeercert(binary_form=True) == first.der
    kept.close()


def test_unchanged_files_are_not_reloaded(certificate: ReloadingCertificate) -> None:
    context = certificate.context
    assert certificate.check() is False
    assert certificate.context is context


def test_a_mismatched_pair_is_refused_logged_once_and_the_old_one_kept(
    ca: CertificateAuthority,
    volume: tuple[SecretVolume, ServingPair],
    certificate: ReloadingCertificate,
    server: WebhookServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    vol, first = volume
    second, third = ca.issue("second"), ca.issue("third")
    vol.publish(cert_pem=second.cert_pem, key_pem=third.key_pem)
    with caplog.at_level(logging.ERROR, logger=TLS_LOGGER):
        assert certificate.check() is False
        assert certificate.check() is False
    (record,) = [r for r in caplog.records if r.name == TLS_LOGGER]
    assert "cannot be loaded, keeping the current pair" in record.getMessage()
    assert str(vol.cert_file) in record.getMessage()
    assert _served(ca, server.port) == first.der
    # The next good pair is taken.
    vol.publish(cert_pem=third.cert_pem, key_pem=third.key_pem)
    assert certificate.check() is True
    assert _served(ca, server.port) == third.der


def test_a_half_written_file_is_refused_until_it_is_whole(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    # Files written in place (no symlink swap), as an operator's script might.
    first, second = ca.issue("first"), ca.issue("second")
    cert_file, key_file = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert_file.write_bytes(first.cert_pem)
    key_file.write_bytes(first.key_pem)
    certificate = ReloadingCertificate(cert_file, key_file)
    context = certificate.context
    cert_file.write_bytes(second.cert_pem[: len(second.cert_pem) // 2])
    assert certificate.check() is False
    assert certificate.context is context
    cert_file.write_bytes(second.cert_pem)
    assert certificate.check() is False  # the key is still the first pair's
    key_file.write_bytes(second.key_pem)
    assert certificate.check() is True
    assert certificate.context is not context


def test_a_removed_file_keeps_the_old_pair(
    volume: tuple[SecretVolume, ServingPair], certificate: ReloadingCertificate
) -> None:
    vol, _ = volume
    context = certificate.context
    os.unlink(vol.root / "..data")
    assert certificate.check() is False
    assert certificate.context is context


def test_an_unloadable_first_pair_is_an_error_naming_both_files(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("not a certificate\n")
    (tmp_path / "tls.key").write_text("not a key\n")
    with pytest.raises(CertificateLoadError) as info:
        ReloadingCertificate(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert info.value.cert_file == tmp_path / "tls.crt"
    assert str(tmp_path / "tls.key") in str(info.value)


def test_the_watcher_reloads_until_stopped(
    ca: CertificateAuthority,
    volume: tuple[SecretVolume, ServingPair],
    certificate: ReloadingCertificate,
) -> None:
    vol, _ = volume
    stop = threading.Event()
    watcher = threading.Thread(target=certificate.watch, args=(stop,), kwargs={"interval": 0.05})
    watcher.start()
    try:
        context = certificate.context
        second = ca.issue("second")
        vol.publish(cert_pem=second.cert_pem, key_pem=second.key_pem)
        deadline = time.monotonic() + 30
        while certificate.context is context:
            assert time.monotonic() < deadline, "the watcher did not reload the pair"
            time.sleep(0.05)
    finally:
        stop.set()
        watcher.join(timeout=10)
    assert not watcher.is_alive()


def test_console_script_serves_a_rotated_pair_without_restart(
    ca: CertificateAuthority, volume: tuple[SecretVolume, ServingPair]
) -> None:
    vol, first = volume
    port = free_port()
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "dra-webhook"),
            f"--tls-cert-file={vol.cert_file}",
            f"--tls-private-key-file={vol.key_file}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            "--tls-reload-interval=0.1",
            "--shutdown-delay=0",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        # The rotation below is waited for until 30 s past the start's 30 s.
        deadline = time.monotonic() + 30
        assert first_answer(proc, lambda: _served(ca, port)) == first.der
        second = ca.issue("second")
        vol.publish(cert_pem=second.cert_pem, key_pem=second.key_pem)
        while (served := _served(ca, port)) != second.der:
            assert served == first.der
            assert time.monotonic() < deadline + 30, "dra-webhook kept the old certificate"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        log = proc.communicate()[1]
        assert "reloaded certificate" in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_rejects_a_reload_interval_that_is_not_positive(
    volume: tuple[SecretVolume, ServingPair],
) -> None:
    vol, _ = volume
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "dra-webhook"),
            f"--tls-cert-file={vol.cert_file}",
            f"--tls-private-key-file={vol.key_file}",
            "--tls-reload-interval=0",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "--tls-reload-interval" in proc.stderr
