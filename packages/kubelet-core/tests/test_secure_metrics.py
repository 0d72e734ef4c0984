"""The plugins' /metrics: HTTPS with delegated auth by default, plain HTTP only when asked;
the flags validated and named."""

from __future__ import annotations

import argparse
import http.client
import ssl

import pytest
from dra_kube_client import DelegatedAuth, ServingSecurity
from dra_kube_client.testing import Reviews
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.metrics import PluginMetrics, serve_metrics
from dra_kubelet_core.settings import add_flags, common_flags, common_settings_from_args

SCRAPER = "system:serviceaccount:monitoring:prometheus"


def _scrape(port: int, token: str | None) -> tuple[int, str]:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the self-signed certificate, as insecureSkipVerify
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"} if token else {})
    resp = conn.getresponse()
    body = resp.read().decode()
    conn.close()
    return resp.status, body


def test_plugin_metrics_need_an_authenticated_and_authorized_scraper() -> None:
    metrics = PluginMetrics()
    metrics.init_driver("gpu.nvidia.com")
    reviews = Reviews(
        tokens={"scraper": SCRAPER, "pod": "system:serviceaccount:team-a:default"},
        allowed={(SCRAPER, "/metrics", "get")},
    )
    server = serve_metrics(
        metrics.registry,
        "127.0.0.1",
        0,
        "/metrics",
        tls=ServingSecurity().tls_context("127.0.0.1"),
        auth=DelegatedAuth(reviews.transport()),
    )
    try:
        port = int(server.server_address[1])
        assert _scrape(port, None)[0] == 401
        assert _scrape(port, "pod")[0] == 403
        status, body = _scrape(port, "scraper")
        assert status == 200
        assert "nvidia_dra_requests_total" in body
    finally:
        server.shutdown()
        server.server_close()


def _settings(*argv: str) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    add_flags(parser, list(common_flags("gpu.nvidia.com").values()), {})
    return common_settings_from_args(parser.parse_args(["--node-name", "n1", *argv]))


def test_metrics_are_secure_unless_insecure_is_asked_for() -> None:
    assert _settings()["metrics_insecure"] is False
    assert _settings("--metrics-insecure=true")["metrics_insecure"] is True


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--metrics-insecure=yes-please"], "--metrics-insecure"),
        (["--metrics-tls-cert-file=/tls/tls.crt"], "--metrics-tls-cert-file"),
    ],
)
def test_bad_metrics_flags_are_named(argv: list[str], flag: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        _settings(*argv)
    assert err.value.setting == flag
