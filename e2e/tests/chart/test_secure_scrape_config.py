"""The harness' scrape of the driver's secure /metrics, without a cluster: the job that
``secure_scrape_config`` renders passes ``promtool check config`` and a real Prometheus
scrapes a secure endpoint of the driver's own serving code with it (``up`` 1, the series in),
while the same endpoint refuses a scrape without the token."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_e2e.prometheus import (
    ensure_prometheus,
    fetch_metrics,
    pod_target,
    secure_scrape_config,
)
from dra_e2e.readiness import free_port
from dra_kube_client import DelegatedAuth, ServingSecurity, admit, start_http_server
from dra_kube_client.testing import Reviews

SCRAPER = "system:serviceaccount:dra:dra-metrics-reader"


def test_the_job_is_https_with_the_token_file_and_no_verification(tmp_path: Path) -> None:
    job = secure_scrape_config(
        "plugin", ["10.200.0.5:8080"], token_file=tmp_path / "t", honor_labels=True
    )
    assert job == {
        "job_name": "plugin",
        "scheme": "https",
        "metrics_path": "/metrics",
        "authorization": {"type": "Bearer", "credentials_file": str(tmp_path / "t")},
        "tls_config": {"insecure_skip_verify": True},
        "static_configs": [{"targets": ["10.200.0.5:8080"]}],
        "honor_labels": True,
    }
    assert "honor_labels" not in secure_scrape_config("c", [], token_file=tmp_path / "t")


def test_pod_targets_bracket_ipv6() -> None:
    assert pod_target({"status": {"podIP": "10.1.2.3"}}, 8080) == "10.1.2.3:8080"
    assert pod_target({"status": {"podIP": "fd00::5"}}, 8080) == "[fd00::5]:8080"


@pytest.fixture
def secure_endpoint() -> Iterator[str]:
    """``host:port`` of an HTTPS /metrics that only the token ``scrape-me`` may read."""
    reviews = Reviews(tokens={"scrape-me": SCRAPER}, allowed={(SCRAPER, "/metrics", "get")})
    auth = DelegatedAuth(reviews.transport())

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if not admit(self, auth):
                return
            body = b"dra_probe_total 7\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server: ThreadingHTTPServer = start_http_server(
        ("127.0.0.1", 0), Handler, tls=ServingSecurity().tls_context("127.0.0.1")
    )
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as resp:
        result: list[dict[str, Any]] = json.loads(resp.read())["data"]["result"]
    return result


def test_fetch_needs_the_token(secure_endpoint: str) -> None:
    assert fetch_metrics(secure_endpoint, "scrape-me") == "dra_probe_total 7\n"
    with pytest.raises(urllib.error.HTTPError) as err:
        fetch_metrics(secure_endpoint, "wrong")
    assert err.value.code == 401
    err.value.close()


def test_prometheus_scrapes_a_secure_endpoint_with_the_rendered_job(
    secure_endpoint: str, tmp_path: Path
) -> None:
    binaries = ensure_prometheus(progress=print)
    token = tmp_path / "token"
    token.write_text("scrape-me")
    config = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [
            secure_scrape_config("driver", [secure_endpoint], token_file=token),
        ],
    }
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    subprocess.run([str(binaries / "promtool"), "check", "config", str(path)], check=True)
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            str(binaries / "prometheus"),
            f"--config.file={path}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        scraped: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not scraped:
            with contextlib.suppress(OSError):
                scraped = _query(url, 'dra_probe_total{job="driver"}')
            time.sleep(0.5)
        assert scraped, (tmp_path / "prometheus.log").read_text()[-3000:]
        assert scraped[0]["value"][1] == "7"
        (up,) = _query(url, 'up{job="driver"}')
        assert up["value"][1] == "1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
