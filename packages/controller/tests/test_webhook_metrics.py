"""The webhook's own review latency (``dra_webhook_review_duration_seconds``): observed by the
server per review with its kind and outcome, served by ``dra-webhook --metrics-port``."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from dra_controller.webhook.cli import main
from dra_controller.webhook.metrics import (
    BUCKETS,
    KINDS,
    OTHER_KIND,
    OUTCOMES,
    REVIEW_SECONDS,
    ReviewMetrics,
    reviewed_kind,
)
from dra_controller.webhook.server import VALIDATE_PATH, WebhookServer
from dra_controller.webhook.tls import ReloadingCertificate
from dra_kube_client.testing import free_port
from webhook_certs import write_self_signed
from webhook_support import SHARING_ON, first_answer, https_request, review_body, serving


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_self_signed(tmp_path_factory.mktemp("tls"))


class _Counted(ReviewMetrics):
    """Says when a review was observed: the server observes it after the response is
    flushed, so a client can read its answer before the observation is made."""

    def __init__(self) -> None:
        super().__init__()
        self.observed = threading.Semaphore(0)

    def observe(self, kind: str, outcome: str, seconds: float) -> None:
        super().observe(kind, outcome, seconds)
        self.observed.release()

    def wait(self, reviews: int) -> None:
        for _ in range(reviews):
            assert self.observed.acquire(timeout=30), "a review was never observed"


@pytest.fixture
def server(cert: tuple[Path, Path]) -> Iterator[WebhookServer]:
    srv = WebhookServer(
        ("127.0.0.1", 0),
        tls=ReloadingCertificate(*cert),
        gates=SHARING_ON,
        metrics=_Counted(),
    )
    with serving(srv):
        yield srv


def _post(
    cert: tuple[Path, Path],
    port: int,
    body: bytes,
    *,
    path: str = VALIDATE_PATH,
    content_type: str = "application/json",
) -> int:
    """The status of a POST of ``body`` (the review path unless ``path`` is named)."""
    return https_request(cert, port, "POST", path, body, content_type)[0]


def _metrics(server: WebhookServer, reviews: int) -> ReviewMetrics:
    """The server's metrics once ``reviews`` reviews were observed."""
    metrics = server.metrics
    assert isinstance(metrics, _Counted)
    metrics.wait(reviews)
    return metrics


def _count(metrics: ReviewMetrics, kind: str, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        f"{REVIEW_SECONDS}_count", {"kind": kind, "outcome": outcome}
    )
    assert value is not None, f"no series for kind={kind} outcome={outcome}"
    return value


def _counts(metrics: ReviewMetrics) -> dict[tuple[str, str], float]:
    return {
        (kind, outcome): _count(metrics, kind, outcome)
        for kind in (*KINDS, OTHER_KIND)
        for outcome in OUTCOMES
    }


def test_an_admitted_claim_is_observed_with_its_kind_and_a_duration_within_the_call(
    server: WebhookServer, cert: tuple[Path, Path]
) -> None:
    started = time.perf_counter()
    assert _post(cert, server.port, review_body("MPS")) == 200
    metrics = _metrics(server, 1)
    call = time.perf_counter() - started
    assert {k: v for k, v in _counts(metrics).items() if v} == {("ResourceClaim", "allowed"): 1}
    seconds = metrics.registry.get_sample_value(
        f"{REVIEW_SECONDS}_sum", {"kind": "ResourceClaim", "outcome": "allowed"}
    )
    # Inside the client's own span around the call (connect, TLS, request, response).
    assert seconds is not None
    assert 0 < seconds <= call
    # The observation is counted from the first bucket bound at or above it up to +Inf.
    bounds = [*BUCKETS, math.inf]
    per_le = {
        float(sample.labels["le"]): sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == f"{REVIEW_SECONDS}_bucket"
        and (sample.labels["kind"], sample.labels["outcome"]) == ("ResourceClaim", "allowed")
    }
    first = min(b for b in bounds if b >= seconds)
    assert per_le == {b: (1.0 if b >= first else 0.0) for b in bounds}


def test_a_denied_template_is_observed_as_denied(
    server: WebhookServer, cert: tuple[Path, Path]
) -> None:
    assert _post(cert, server.port, review_body("Bogus", kind="ResourceClaimTemplate")) == 200
    assert _post(cert, server.port, review_body("TimeSlicing", kind="ResourceClaimTemplate")) == 200
    assert {k: v for k, v in _counts(_metrics(server, 2)).items() if v} == {
        ("ResourceClaimTemplate", "denied"): 1,
        ("ResourceClaimTemplate", "allowed"): 1,
    }


def test_requests_answered_with_an_http_error_are_observed_as_errors(
    server: WebhookServer, cert: tuple[Path, Path]
) -> None:
    assert _post(cert, server.port, b"{not json") == 400
    assert _post(cert, server.port, review_body("MPS"), content_type="text/x") == 415
    # An AdmissionReview without a uid: its kind is known, no verdict.
    assert _post(cert, server.port, review_body("MPS", uid="")) == 400
    # Not the validate path: not a review, not observed.
    assert _post(cert, server.port, review_body("MPS"), path="/other") == 404
    assert {k: v for k, v in _counts(_metrics(server, 3)).items() if v} == {
        (OTHER_KIND, "error"): 2,
        ("ResourceClaim", "error"): 1,
    }


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ({"request": {"kind": {"kind": "ResourceClaim"}}}, "ResourceClaim"),
        ({"request": {"kind": {"kind": "ResourceClaimTemplate"}}}, "ResourceClaimTemplate"),
        ({"request": {"kind": {"kind": "Pod"}}}, OTHER_KIND),
        ({"request": {"kind": "ResourceClaim"}}, OTHER_KIND),
        ({"request": None}, OTHER_KIND),
        ([1, 2], OTHER_KIND),
    ],
)
def test_the_kind_label_is_a_closed_set(body: object, kind: str) -> None:
    assert reviewed_kind(body) == kind


def test_an_unknown_outcome_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="outcome: 'maybe'"):
        ReviewMetrics().observe("ResourceClaim", "maybe", 0.001)


def test_the_buckets_can_place_p99_against_the_20ms_target() -> None:
    # The target is a bucket bound, with bounds on both sides of it (5 and 25 ms in the
    # API server's histogram could not tell).
    assert 0.02 in BUCKETS
    assert [b for b in BUCKETS if 0.005 < b < 0.025] == [0.0075, 0.01, 0.015, 0.02]


def _scrape(port: int) -> str:
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


@pytest.mark.parametrize("metrics_on", [True, False], ids=["metrics-port", "no-metrics-port"])
def test_console_script_serves_metrics_in_plain_http_only_when_asked(
    cert: tuple[Path, Path], metrics_on: bool
) -> None:
    port, metrics_port = free_port(), free_port()
    argv = [
        str(Path(sys.executable).parent / "dra-webhook"),
        f"--tls-cert-file={cert[0]}",
        f"--tls-private-key-file={cert[1]}",
        f"--port={port}",
        "--bind-address=127.0.0.1",
        "--shutdown-delay=0",
    ]
    if metrics_on:
        argv.append(f"--metrics-port={metrics_port}")
    # The MPS config of review_body needs its gate (NVIDIA's default: off, denied).
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "FEATURE_GATES": "MPSSupport=true"}
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert first_answer(proc, lambda: https_request(cert, port, "GET", "/readyz"))[0] == 200
        assert _post(cert, port, review_body("MPS")) == 200
        if metrics_on:
            # Observed just after the answer was flushed: scraped until it is there.
            counted = f'{REVIEW_SECONDS}_count{{kind="ResourceClaim",outcome="allowed"}} 1.0'
            deadline = time.monotonic() + 30
            while counted not in (text := _scrape(metrics_port)):
                assert time.monotonic() < deadline, text
                time.sleep(0.05)
            assert f'{REVIEW_SECONDS}_bucket{{kind="ResourceClaim",le="0.02"' in text
        else:
            with pytest.raises(urllib.error.URLError, match="Connection refused"):
                _scrape(metrics_port)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        err = proc.communicate()[1]
        assert (f"serving /metrics on http://127.0.0.1:{metrics_port}" in err) is metrics_on
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--metrics-port=70000"], "--metrics-port: 70000 is not a TCP port"),
        (["--port=9443", "--metrics-port=9443"], "--metrics-port: 9443 is --port's too"),
    ],
)
def test_cli_refuses_a_bad_metrics_port_naming_the_flag(
    capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--tls-cert-file", "x.crt", "--tls-private-key-file", "x.key", *flags])
    assert info.value.code == 2
    assert named in capsys.readouterr().err


def test_a_server_without_metrics_observes_nothing(
    cert: tuple[Path, Path],
) -> None:
    srv = WebhookServer(("127.0.0.1", 0), tls=ReloadingCertificate(*cert), gates=SHARING_ON)
    with serving(srv):
        assert srv.metrics is None
        assert _post(cert, srv.port, review_body("MPS")) == 200
