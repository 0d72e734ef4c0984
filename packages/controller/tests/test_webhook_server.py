"""The webhook's HTTPS server and ``dra-webhook`` command, over real TLS on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from dra_controller.webhook.cli import main
from dra_controller.webhook.server import WebhookServer
from dra_controller.webhook.tls import ReloadingCertificate
from dra_kube_client.testing import free_port
from webhook_certs import write_self_signed
from webhook_support import (
    SHARING_ON,
    first_answer,
    https_client,
    https_request,
    review_body,
    serving,
)


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def server(cert: tuple[Path, Path]) -> Iterator[WebhookServer]:
    with serving(
        WebhookServer(("127.0.0.1", 0), tls=ReloadingCertificate(*cert), gates=SHARING_ON)
    ) as srv:
        yield srv


def test_readyz(server: WebhookServer, cert: tuple[Path, Path]) -> None:
    assert https_request(cert, server.port, "GET", "/readyz") == (200, b"ok\n")


def test_validate_admits_and_denies(server: WebhookServer, cert: tuple[Path, Path]) -> None:
    path = "/validate-resource-claim-parameters"
    status, body = https_request(cert, server.port, "POST", path, review_body("MPS"))
    assert status == 200
    assert json.loads(body)["response"] == {"uid": "abc", "allowed": True}
    status, body = https_request(cert, server.port, "POST", path, review_body("X"))
    assert status == 200
    response = json.loads(body)["response"]
    assert response["allowed"] is False
    assert (
        "spec.devices.config[0].opaque.parameters.sharing.strategy"
        in (response["status"]["message"])
    )


def test_kept_alive_reviews_are_not_held_for_a_delayed_ack(
    server: WebhookServer, cert: tuple[Path, Path]
) -> None:
    # Headers and body sent as two writes made every review on a kept-alive connection wait
    # for the client's delayed ACK (40 ms on Linux); one write answers in about a millisecond.
    conn = https_client(cert, server.port)
    body = review_body("MPS")
    took = []
    try:
        for _ in range(21):
            started = time.monotonic()
            conn.request(
                "POST",
                "/validate-resource-claim-parameters",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            assert response.status == 200
            response.read()
            took.append(time.monotonic() - started)
    finally:
        conn.close()
    assert sorted(took[1:])[10] < 0.030


@pytest.mark.parametrize(
    ("method", "path", "body", "content_type", "code"),
    [
        ("GET", "/nope", None, "", 404),
        ("POST", "/readyz", b"{}", "application/json", 404),
        ("POST", "/validate-resource-claim-parameters", b"{}", "text/plain", 415),
        ("POST", "/validate-resource-claim-parameters", b"{not json", "application/json", 400),
        (
            "POST",
            "/validate-resource-claim-parameters",
            b'{"kind": "Pod"}',
            "application/json",
            400,
        ),
    ],
)
def test_bad_requests_get_http_errors(
    server: WebhookServer,
    cert: tuple[Path, Path],
    method: str,
    path: str,
    body: bytes | None,
    content_type: str,
    code: int,
) -> None:
    assert https_request(cert, server.port, method, path, body, content_type)[0] == code


def test_a_stalled_handshake_does_not_block_others(
    server: WebhookServer, cert: tuple[Path, Path]
) -> None:
    with socket.create_connection(("127.0.0.1", server.port)):
        # Connected, never says hello: the next client must still be served.
        assert https_request(cert, server.port, "GET", "/readyz")[0] == 200


def test_cli_rejects_unreadable_certificates(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(
            [
                "--tls-cert-file",
                str(tmp_path / "no.crt"),
                "--tls-private-key-file",
                str(tmp_path / "no.key"),
            ]
        )
    assert info.value.code == 2


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (["--feature-gates=Nope=true"], {}, "unknown feature gate 'Nope'"),
        (["--feature-gates=MPSSupport=maybe"], {}, "'MPSSupport=maybe' is not Gate=true|false"),
        # NVIDIA's rule: DynamicMIG excludes PassthroughSupport (AllAlpha sets both).
        ([], {"FEATURE_GATES": "AllAlpha=true"}, "DynamicMIG and PassthroughSupport"),
    ],
)
def test_cli_refuses_bad_feature_gates_naming_the_flag_as_the_plugin_does(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    env: dict[str, str],
    named: str,
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as info:
        main(["--tls-cert-file", "x.crt", "--tls-private-key-file", "x.key", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--feature-gates: " in err
    assert named in err


def test_console_script_serves_until_sigterm(cert: tuple[Path, Path]) -> None:
    port = free_port()
    script = Path(sys.executable).parent / "dra-webhook"
    proc = subprocess.Popen(
        [
            str(script),
            f"--tls-cert-file={cert[0]}",
            f"--tls-private-key-file={cert[1]}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            "--shutdown-delay=1",
        ],
        stderr=subprocess.PIPE,
        text=True,
        # The chart's form: FEATURE_GATES, the value the plugin gets.
        env={**os.environ, "PYTHONUNBUFFERED": "1", "FEATURE_GATES": "MPSSupport=true"},
    )
    try:
        ready = first_answer(proc, lambda: https_request(cert, port, "GET", "/readyz"))
        assert ready == (200, b"ok\n")
        path = "/validate-resource-claim-parameters"
        verdicts = {}
        for strategy in ("MPS", "TimeSlicing"):
            body = review_body(strategy)
            verdicts[strategy] = json.loads(https_request(cert, port, "POST", path, body)[1])
        assert verdicts["MPS"]["response"]["allowed"] is True
        denied = verdicts["TimeSlicing"]["response"]
        assert denied["allowed"] is False
        assert '"TimeSlicingSettings" feature gate is not enabled' in denied["status"]["message"]
        proc.send_signal(signal.SIGTERM)
        # Draining: still serving reviews, no longer ready.
        assert https_request(cert, port, "GET", "/readyz")[0] == 503
        assert https_request(cert, port, "POST", path, review_body("MPS"))[0] == 200
        assert proc.wait(timeout=15) == 0
        err = proc.communicate()[1]
        assert "draining for 1.0s before shutdown" in err
        assert f"on https://127.0.0.1:{port}" in err
        assert "sharing gates TimeSlicingSettings=false, MPSSupport=true" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_one_connection_serves_several_reviews(
    server: WebhookServer, cert: tuple[Path, Path]
) -> None:
    conn = https_client(cert, server.port)
    try:
        for strategy, allowed in (("MPS", True), ("X", False), ("TimeSlicing", True)):
            body = review_body(strategy)
            conn.request(
                "POST",
                "/validate-resource-claim-parameters",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            response = conn.getresponse()
            assert response.version == 11
            assert json.loads(response.read())["response"]["allowed"] is allowed
    finally:
        conn.close()


def test_a_draining_server_serves_each_request_and_closes_the_connection_after_it(
    server: WebhookServer, cert: tuple[Path, Path]
) -> None:
    """After SIGTERM the API server may still send reviews on kept-alive connections: each
    is answered, with ``Connection: close`` so the client does not send another on it."""
    conn = https_client(cert, server.port)
    try:
        path = "/validate-resource-claim-parameters"
        body = review_body("MPS")
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        first = conn.getresponse()
        first.read()
        assert first.getheader("Connection") is None, "kept alive before the drain"
        server.begin_drain()
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        during = conn.getresponse()
        assert during.status == 200
        assert json.loads(during.read())["response"]["allowed"] is True
        assert during.getheader("Connection") == "close"
    finally:
        conn.close()
    assert https_request(cert, server.port, "GET", "/readyz") == (503, b"draining\n")
