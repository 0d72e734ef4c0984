"""The allocation controller from the chart, scraped by a real Prometheus server.

The chart's ``dra-allocation-controller`` Deployment runs on the harness cluster; a
Prometheus (built from its Go module, ``dra_e2e.prometheus``) runs on this machine and
scrapes its secure /metrics at the pods' IPs over HTTPS with a token of the chart's metrics
reader (the API server's proxy would drop the token), with the chart's DRAResourceExhausted
rules (the release upgraded to a short ``for:``). Twelve claims no fake GPU can satisfy
(memory >= 80Gi; the largest is an A100 of 40 GiB) make the alert go pending, then firing;
the pod using one of them gets the controller's ``DRAUnsatisfiable`` Event naming the memory
gap; a claim that fits shows in ``kube_resourceclaim_allocated``.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from dra_e2e.prometheus import (
    ensure_prometheus,
    pod_target,
    scraper_token,
    secure_scrape_config,
)
from dra_e2e.readiness import free_port
from driver_support import Driver, applied, events_for, pod
from upgrade_support import upgrade_reusing_values

# driver and driver_diagnostics: conftest.py.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

NAMESPACE = "dra-alloc-ctl"
COMPONENT = "app.kubernetes.io/component=allocation-controller"
RULES_FILE = "dra-allocation-controller.rules.yaml"
ALERT_FOR = "20s"
UNSATISFIABLE = 12
BIG = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
STAND_IN_IMAGE = "ubuntu:22.04"


def _claim(name: str, selector: str | None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.nvidia.com"}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


def _pod(name: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [
                {
                    "name": "ctr",
                    "image": STAND_IN_IMAGE,
                    "command": ["bash", "-c", "trap 'exit 0' TERM; sleep 9999 & wait"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def _manifest() -> str:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    ]
    objects += [_claim(f"big-{i}", BIG) for i in range(UNSATISFIABLE)]
    # DRAResourceExhausted counts claims a pod waits for: every big claim has its pod.
    objects += [_pod("trainer", "big-0")]
    objects += [_pod(f"trainer-{i}", f"big-{i}") for i in range(1, UNSATISFIABLE)]
    objects += [_claim("small", None), _pod("fits", "small")]
    return yaml.safe_dump_all(objects)


class Prometheus:
    """A Prometheus server process and its HTTP API."""

    def __init__(self, url: str) -> None:
        """Talk to the server at ``url``."""
        self.url = url

    def get(self, path: str, **params: str) -> Any:
        """GET an API path; the ``data`` of the answer."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as resp:
            body = json.loads(resp.read())
        assert body["status"] == "success", body
        return body["data"]

    def value(self, expr: str) -> float | None:
        """The value of a one-series instant query (None when empty or not reachable yet)."""
        try:
            result = self.get("/api/v1/query", query=expr)["result"]
        except OSError:
            return None
        return float(result[0]["value"][1]) if result else None

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """Active alerts named ``name``."""
        return [a for a in self.get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name]


@pytest.fixture(scope="module")
def prometheus(driver: Driver, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """Prometheus scraping the chart's controller every 2 s, with the chart's rules."""
    binaries = ensure_prometheus(progress=print)
    workdir = tmp_path_factory.mktemp("prometheus")
    # The test values: the same chart, a short `for:` so that the alert fires in seconds.
    upgrade_reusing_values(driver, {"allocationController.alerts.for": ALERT_FOR}, timeout="3m")
    config_maps = driver.cluster.kubectl_json(
        "get", "configmaps", "-n", driver.namespace, "-l", COMPONENT
    )
    (rules,) = [
        c["data"][RULES_FILE] for c in config_maps["items"] if RULES_FILE in c.get("data", {})
    ]
    assert f"for: {ALERT_FOR}" in rules
    (workdir / RULES_FILE).write_text(rules)
    pods = driver.cluster.kubectl_json("get", "pods", "-n", driver.namespace, "-l", COMPONENT)
    targets = [
        pod_target(p, port["containerPort"])
        for p in pods["items"]
        if p.get("status", {}).get("podIP")
        for c in p["spec"]["containers"]
        for port in c.get("ports", [])
        if port.get("name") == "metrics"
    ]
    assert targets, "a running allocation controller pod with a metrics port"
    token_file = workdir / "scraper.token"
    token_file.write_text(scraper_token(driver.cluster, driver.namespace))
    token_file.chmod(0o600)
    config = {
        "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
        "rule_files": [str(workdir / RULES_FILE)],
        "scrape_configs": [
            secure_scrape_config("dra-allocation-controller", targets, token_file=token_file)
        ],
    }
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (workdir / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            str(binaries / "prometheus"),
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    prom = Prometheus(f"http://127.0.0.1:{port}")
    try:
        driver.cluster.wait_until(
            "Prometheus to scrape the controller",
            lambda: prom.value('up{job="dra-allocation-controller"}') == 1,
            timeout=90,
            interval=1,
        )
        yield prom
    except BaseException:
        print((workdir / "prometheus.log").read_text()[-4000:])
        raise
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def _controller_logs(driver: Driver) -> str:
    return driver.cluster.kubectl("logs", "-n", driver.namespace, "-l", COMPONENT, "--tail=80")


def test_controller_is_ready_and_leads(driver: Driver, prometheus: Prometheus) -> None:
    (ctl,) = driver.cluster.kubectl_json("get", "pods", "-n", driver.namespace, "-l", COMPONENT)[
        "items"
    ]
    ready = {c["type"]: c["status"] for c in ctl["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert prometheus.value("dra_allocation_controller_leader") == 1
    assert (
        prometheus.value('sum(node_dra_resource_available{resource_class="gpu.nvidia.com"})') or 0
    ) >= 1


def test_unsatisfiable_claims_fire_the_alert_and_explain_the_pod(
    driver: Driver, prometheus: Prometheus
) -> None:
    cluster = driver.cluster
    with applied(cluster, _manifest(), namespaces=(NAMESPACE,)):
        states: list[str] = []

        def alert_state() -> bool:
            alerts = [
                a
                for a in prometheus.alerts("DRAResourceExhausted")
                if a["labels"].get("resource_class") == "gpu.nvidia.com"
            ]
            if alerts and (not states or states[-1] != alerts[0]["state"]):
                states.append(alerts[0]["state"])
            return bool(states) and states[-1] == "firing"

        cluster.wait_until("DRAResourceExhausted to fire", alert_state, timeout=180, interval=1)
        assert states == ["pending", "firing"]

        # The controller watches pods with spec.nodeName= (only pods not bound): against the
        # real API server its cache follows the pending pods, bound ones leaving it.
        def pod_cache_is_the_pending_pods() -> bool:
            pods = cluster.kubectl_json("get", "pods", "-A")["items"]
            pending = sum(1 for p in pods if not p["spec"].get("nodeName"))
            assert len(pods) > pending > 0  # bound pods exist, trainer is pending
            cached = prometheus.value('dra_allocation_controller_cache_objects{kind="Pod"}')
            return cached == pending

        cluster.wait_until(
            "the controller's pod cache to hold the pending pods only",
            pod_cache_is_the_pending_pods,
            timeout=120,
            interval=2,
        )
        (firing,) = [a for a in prometheus.alerts("DRAResourceExhausted") if a["state"] == "firing"]
        assert float(firing["value"]) == UNSATISFIABLE
        assert firing["annotations"]["summary"] == (
            f"gpu.nvidia.com resources exhausted: {UNSATISFIABLE} claims waiting for allocation"
        )

        gap = re.compile(r"request gpu: memory >= 80Gi: best node \S+ has 40Gi")

        def explained() -> list[str]:
            return [
                e
                for e in events_for(cluster, "Pod", "trainer", NAMESPACE)
                if e.startswith("DRAUnsatisfiable: ") and gap.search(e)
            ]

        (event,) = cluster.wait_until(
            "DRAUnsatisfiable on pod trainer", explained, timeout=120, interval=2
        )
        assert "ResourceClaim dra-alloc-ctl/big-0 cannot be allocated" in event

        def claim_explained() -> list[str]:
            events = events_for(cluster, "ResourceClaim", "big-0", NAMESPACE)
            return [e for e in events if e.startswith("DRAUnsatisfiable: ") and gap.search(e)]

        try:
            cluster.wait_until("DRAUnsatisfiable on claim big-0", claim_explained, timeout=60)
        except Exception:
            print(_controller_logs(driver))
            raise
        scheduled = {
            c["type"]: c for c in pod(cluster, "trainer", NAMESPACE)["status"]["conditions"]
        }
        assert scheduled["PodScheduled"]["reason"] == "Unschedulable"

        allocated = (
            f'kube_resourceclaim_allocated{{namespace="{NAMESPACE}",name="small",'
            'resource_class="gpu.nvidia.com"}'
        )
        cluster.wait_until(
            "claim small in kube_resourceclaim_allocated",
            lambda: prometheus.value(allocated) == 1,
            timeout=120,
            interval=2,
        )
        pending_small = f'kube_resourceclaim_pending{{namespace="{NAMESPACE}",name="small"}}'
        assert prometheus.value(pending_small) is None
