"""The kubelet plugin pod's Prometheus endpoint on the harness cluster: NVIDIA's series
(``nvidia_dra_*``) at ``:8080/metrics``, as NVIDIA's chart configures it, counting a real
claim's prepare and unprepare.

Scraped over HTTPS at the pod's IP with a token of the chart's metrics reader (the API
server's pod proxy drops the caller's token, and the endpoint answers 401 without one).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from dra_e2e.handle import ClusterHandle
from dra_e2e.prometheus import fetch_metrics, pod_target, scraper_token
from driver_support import (
    DRIVER,
    Driver,
    applied,
    dump_diagnostics,
    install,
    uninstall,
    wait_running,
)

pytestmark = pytest.mark.e2e

PORT = 8080
SAMPLE = re.compile(r"^(?P<name>[a-z_:]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart installed on fake GPUs (or the release named by DRA_E2E_RELEASE)."""
    installed = install(e2e_cluster, tmp_path_factory.mktemp("driver-images"))
    try:
        yield installed
    except BaseException:
        print(dump_diagnostics(installed))
        raise
    finally:
        uninstall(installed)


def _scrape(driver: Driver) -> dict[tuple[str, str], float]:
    """(name, sorted labels) -> value of one plugin pod's metrics."""
    (pod,) = driver.plugin_pods()
    ports = [
        p["containerPort"]
        for c in pod["spec"]["containers"]
        for p in c.get("ports", [])
        if p.get("name") == "metrics"
    ]
    assert ports == [PORT], f"the chart must serve metrics on :{PORT} (NVIDIA's default)"
    text = fetch_metrics(pod_target(pod, PORT), scraper_token(driver.cluster, driver.namespace))
    samples: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            samples[(match["name"], _labels(match["labels"] or ""))] = float(match["value"])
    return samples


def _labels(text: str) -> str:
    """Label pairs in name order (the exposition's own order is the client's choice)."""
    return ",".join(sorted(re.findall(r'[a-zA-Z_][a-zA-Z0-9_]*="[^"]*"', text)))


def _node(driver: Driver) -> str:
    (pod,) = driver.plugin_pods()
    return str(pod["spec"]["nodeName"])


def _pod_with_a_gpu(namespace: str) -> str:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
                }
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "metered", "namespace": namespace},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "ctr",
                    "image": "ubuntu:22.04",
                    "command": ["bash", "-c", "trap 'exit 0' TERM; sleep 9999 & wait"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        },
    }
    return json.dumps(template) + "\n---\n" + json.dumps(pod)


def test_nvidias_series_are_exported_before_any_claim(driver: Driver) -> None:
    samples = _scrape(driver)
    for operation in ("prepare", "unprepare"):
        labels = f'driver="{DRIVER}",operation="{operation}"'
        assert ("nvidia_dra_requests_total", labels) in samples
        assert ("nvidia_dra_requests_inflight", labels) in samples
        assert ("nvidia_dra_request_duration_seconds_count", labels) in samples
        bucket = _labels(f'{labels},le="12.8"')
        assert ("nvidia_dra_request_duration_seconds_bucket", bucket) in samples
    node = _node(driver)
    for device_type in ("gpu", "mig", "vfio", "unknown"):
        labels = f'device_type="{device_type}",driver="{DRIVER}",node="{node}"'
        assert ("nvidia_dra_prepared_devices", labels) in samples


def test_a_claims_prepare_and_unprepare_are_counted(driver: Driver, e2e_namespace: str) -> None:
    cluster, node = driver.cluster, _node(driver)
    prepare = ("nvidia_dra_requests_total", f'driver="{DRIVER}",operation="prepare"')
    unprepare = ("nvidia_dra_requests_total", f'driver="{DRIVER}",operation="unprepare"')
    gpus = ("nvidia_dra_prepared_devices", f'device_type="gpu",driver="{DRIVER}",node="{node}"')
    before = _scrape(driver)
    with applied(cluster, _pod_with_a_gpu(e2e_namespace)):
        wait_running(cluster, "metered", e2e_namespace)
        during = _scrape(driver)
        assert during[prepare] == before[prepare] + 1
        assert during[gpus] == before[gpus] + 1
    cluster.wait_until(
        "the claim's unprepare to be counted",
        lambda: _scrape(driver)[unprepare] == before[unprepare] + 1,
        timeout=120,
        interval=2,
    )
    after = _scrape(driver)
    assert after[gpus] == before[gpus]
    errors = (
        "nvidia_dra_node_prepare_errors_total",
        f'driver="{DRIVER}",error_type="prepare_devices"',
    )
    assert after.get(errors, 0) == before.get(errors, 0)
