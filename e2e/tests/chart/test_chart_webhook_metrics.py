"""The webhook's own metrics port (``webhook.metrics.*``, off by default), rendered offline by
the pinned Helm: the flag, the container port and the Service port, as the allocation
controller's ``metrics`` port."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import BASE_SETS, CHART, NAMESPACE, OWN_IMAGE, HelmFailed, run_helm, set_args
from chart_render import render_notes
from dra_controller.webhook.metrics import REVIEW_SECONDS

WEBHOOK = "dra-dra-driver-nvidia-gpu-webhook"
NVIDIA_VALUES = Path(__file__).parent / "fixtures" / "nvidia-values-0.5.0-dev.yaml"
ENABLED = {"webhook.enabled": "true", "webhook.tls.mode": "secret"}


def _render(helm: Path, sets: Mapping[str, str], *extra: str) -> list[dict[str, Any]]:
    args = ["template", "dra", str(CHART), "--namespace", NAMESPACE, *extra]
    out = run_helm(helm, *args, *set_args({**BASE_SETS, **sets}))
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (obj,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == WEBHOOK]
    return obj


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_metrics_are_off_by_default(helm: Path) -> None:
    objects = _render(helm, ENABLED)
    container = _container(objects)
    assert not [a for a in container["args"] if a.startswith("--metrics-port")]
    assert [p["name"] for p in container["ports"]] == ["webhook"]
    assert [p["name"] for p in _one(objects, "Service")["spec"]["ports"]] == ["https"]


@pytest.mark.parametrize(("sets", "port"), [({}, 8080), ({"webhook.metrics.port": "9102"}, 9102)])
def test_metrics_port_on_the_container_and_the_service_when_enabled(
    helm: Path, sets: dict[str, str], port: int
) -> None:
    objects = _render(helm, {**ENABLED, "webhook.metrics.enabled": "true", **sets})
    container = _container(objects)
    assert f"--metrics-port={port}" in container["args"]
    assert container["ports"] == [
        {"name": "webhook", "containerPort": 443, "protocol": "TCP"},
        {"name": "metrics", "containerPort": port, "protocol": "TCP"},
    ]
    # The probes stay on the webhook's HTTPS port: they check what the API server calls.
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "webhook"
    assert _one(objects, "Service")["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "webhook", "protocol": "TCP"},
        {"name": "metrics", "port": port, "targetPort": "metrics", "protocol": "TCP"},
    ]


@pytest.mark.parametrize(
    "sets",
    [
        {"webhook.metrics.port": "443"},
        {"webhook.metrics.port": "9443", "webhook.containerPort": "9443"},
        {"webhook.metrics.port": "8443", "webhook.servicePort": "8443"},
    ],
    ids=["default-container-port", "container-port", "service-port"],
)
def test_a_metrics_port_that_is_the_webhooks_own_is_refused(
    helm: Path, sets: dict[str, str]
) -> None:
    with pytest.raises(HelmFailed, match=r"webhook\.metrics\.port=\d+ is also webhook"):
        _render(helm, {**ENABLED, "webhook.metrics.enabled": "true", **sets})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("webhook.metrics.port", "0"),
        ("webhook.metrics.port", "70000"),
        ("webhook.metrics.enabled", "yes"),
        ("webhook.metrics.insecure", "true"),
    ],
)
def test_schema_rejects_bad_metrics_values(helm: Path, key: str, value: str) -> None:
    with pytest.raises(HelmFailed, match="values don't meet the specifications of the schema"):
        _render(helm, {key: value})


def test_nvidias_values_render_without_the_metrics_port(helm: Path) -> None:
    # NVIDIA's values file has no webhook.metrics: ours stay at their default, off.
    objects = _render(helm, {**ENABLED, "image.repository": OWN_IMAGE}, "-f", str(NVIDIA_VALUES))
    assert "metrics" not in (yaml.safe_load(NVIDIA_VALUES.read_text()).get("webhook") or {})
    assert [p["name"] for p in _container(objects)["ports"]] == ["webhook"]


def test_values_document_the_metrics_default_off() -> None:
    text = (CHART / "values.yaml").read_text()
    webhook = yaml.safe_load(text)["webhook"]
    assert webhook["metrics"] == {"enabled": False, "port": 8080}
    assert REVIEW_SECONDS in text


def test_notes_say_where_the_webhook_metrics_are_only_when_on(helm: Path) -> None:
    line = f'service/{WEBHOOK} port "metrics" (/metrics, plain HTTP)'
    assert line in render_notes(helm, {**ENABLED, "webhook.metrics.enabled": "true"})
    assert REVIEW_SECONDS not in render_notes(helm, ENABLED)
