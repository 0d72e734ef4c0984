"""Secure /metrics in the chart: the components get --metrics-insecure=false and the review
permissions, a ClusterRole grants get on /metrics, the monitors scrape over HTTPS with the
scraper's token; plain HTTP (and none of that) only with metrics.insecure=true."""

from __future__ import annotations

from typing import Any

from chart_helpers import NAMESPACE, helm_path
from chart_render import render_objects

MONITORS = {
    "monitoring.serviceMonitor": "true",
    "monitoring.podMonitor": "true",
    "resources.computeDomains.enabled": "true",
}
REVIEWS = {
    ("authentication.k8s.io", "tokenreviews", "create"),
    ("authorization.k8s.io", "subjectaccessreviews", "create"),
}


def _args(objects: list[dict[str, Any]]) -> list[str]:
    return [
        a
        for o in objects
        if o["kind"] in ("Deployment", "DaemonSet")
        for c in o["spec"]["template"]["spec"]["containers"]
        for a in c.get("args", [])
        if a.startswith("--metrics-insecure")
    ]


def _grants(objects: list[dict[str, Any]], suffix: str) -> set[tuple[str, str, str]]:
    (role,) = [
        o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith(suffix)
    ]
    return {
        (g, r, v)
        for rule in role["rules"]
        for g in rule.get("apiGroups", [])
        for r in rule.get("resources", [])
        for v in rule["verbs"]
    }


def _endpoints(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        e
        for o in objects
        if o["kind"] in ("ServiceMonitor", "PodMonitor")
        for e in o["spec"].get("endpoints", o["spec"].get("podMetricsEndpoints", []))
    ]


def test_metrics_are_secure_by_default_and_scraped_with_the_readers_token() -> None:
    objects = render_objects(helm_path(), MONITORS)
    assert _args(objects) == ["--metrics-insecure=false"] * 3  # controller, GPU, compute domain
    assert _grants(objects, "-kubelet-plugin") >= REVIEWS
    assert _grants(objects, "-allocation-controller") >= REVIEWS
    (reader,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-metrics-reader")
    ]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    (secret,) = [o for o in objects if o["kind"] == "Secret" and "metrics-reader" in str(o)]
    assert secret["type"] == "kubernetes.io/service-account-token"
    account = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    (binding,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == reader["metadata"]["name"]
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE}
    ]
    endpoints = _endpoints(objects)
    assert len(endpoints) == 3
    for e in endpoints:
        assert e["scheme"] == "https"
        assert e["tlsConfig"] == {"insecureSkipVerify": True}
        assert e["authorization"] == {
            "type": "Bearer",
            "credentials": {"name": secret["metadata"]["name"], "key": "token"},
        }
    (controller,) = [o for o in objects if o["kind"] == "Deployment" and "allocation" in str(o)]
    (container,) = controller["spec"]["template"]["spec"]["containers"]
    probes = [container[p]["httpGet"]["scheme"] for p in ("startupProbe", "livenessProbe")]
    assert probes == ["HTTPS", "HTTPS"]


def test_insecure_metrics_are_plain_http_without_reviews_or_tokens() -> None:
    objects = render_objects(
        helm_path(),
        {
            **MONITORS,
            "allocationController.metrics.insecure": "true",
            "kubeletPlugin.metrics.insecure": "true",
        },
    )
    assert _args(objects) == ["--metrics-insecure=true"] * 3
    assert not REVIEWS & _grants(objects, "-kubelet-plugin")
    assert not REVIEWS & _grants(objects, "-allocation-controller")
    assert not [o for o in objects if "metrics-reader" in o["metadata"]["name"]]
    assert all("scheme" not in e and "authorization" not in e for e in _endpoints(objects))
