"""Per-pod GPU metrics on the harness cluster: a dcgm-style series joined to a running pod.

A pod with one GPU runs; a Prometheus (built from its Go module) on this machine scrapes the
kubelet plugin on the pod's node through the API server's pod proxy (``honor_labels``, as
the chart's PodMonitor) and a stand-in for dcgm-exporter: an HTTP server in this process
serving ``DCGM_FI_DEV_GPU_UTIL`` for the GPU UUID the plugin reports, labelled with the
exporter's own namespace and pod as a scrape of dcgm-exporter carries them. The chart's
recording rules (its ``dra-gpu-pod-metrics.rules.yaml`` ConfigMap) must give the series the
workload's namespace and pod. The info series names the pod's container that uses the claim,
as the harness's kubelet (1.37: ``KubeletPodResourcesDynamicResources`` is GA, always on)
reports it on its PodResources socket, which the chart mounts into the plugin.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
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
from driver_support import Driver, applied, pod, wait_running
from test_allocation_controller_on_cluster import Prometheus

# driver and driver_diagnostics: conftest.py.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

NAMESPACE = "dra-gpu-pod-metrics"
RULES_FILE = "dra-gpu-pod-metrics.rules.yaml"
STAND_IN_IMAGE = "ubuntu:22.04"
UTIL = 42
CONTAINER = "ctr"


def _manifest() -> str:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                        ]
                    }
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer", "namespace": NAMESPACE},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": CONTAINER,
                        "image": STAND_IN_IMAGE,
                        "command": ["bash", "-c", "trap 'exit 0' TERM; sleep 9999 & wait"],
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            },
        },
    ]
    return yaml.safe_dump_all(objects)


class FakeDcgm:
    """A dcgm-exporter stand-in: serves one utilisation series per UUID set on it."""

    def __init__(self) -> None:
        """Listen on a free local port."""
        self.uuids: list[str] = []
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = "".join(
                    f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="{u}",Hostname="node",'
                    f'namespace="gpu-operator",pod="nvidia-dcgm-exporter-x"}} {UTIL}\n'
                    for u in fake.uuids
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def target(self) -> str:
        """``host:port`` to scrape."""
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_dcgm() -> Iterator[FakeDcgm]:
    """The dcgm-exporter stand-in."""
    fake = FakeDcgm()
    try:
        yield fake
    finally:
        fake.close()


def _prometheus_config(
    driver: Driver, workdir: Path, plugin_pod: dict[str, Any], dcgm: FakeDcgm
) -> dict[str, Any]:
    token_file = workdir / "scraper.token"
    token_file.write_text(scraper_token(driver.cluster, driver.namespace))
    token_file.chmod(0o600)
    return {
        "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
        "rule_files": [str(workdir / RULES_FILE)],
        "scrape_configs": [
            # The plugin's secure /metrics at its pod IP (the API server's proxy would drop
            # the token).
            secure_scrape_config(
                "dra-kubelet-plugin",
                [pod_target(plugin_pod, 8080)],
                token_file=token_file,
                honor_labels=True,
            ),
            {
                "job_name": "dcgm-exporter",
                "honor_labels": True,
                "static_configs": [{"targets": [dcgm.target]}],
            },
        ],
    }


def test_a_dcgm_series_gets_the_namespace_and_pod_of_the_gpus_workload(
    driver: Driver, fake_dcgm: FakeDcgm, tmp_path: Path
) -> None:
    cluster = driver.cluster
    config_maps = cluster.kubectl_json("get", "configmaps", "-n", driver.namespace)["items"]
    (rules,) = [c["data"][RULES_FILE] for c in config_maps if RULES_FILE in c.get("data", {})]
    (tmp_path / RULES_FILE).write_text(rules)
    with applied(cluster, _manifest(), namespaces=(NAMESPACE,)):
        wait_running(cluster, "trainer", NAMESPACE)
        node = pod(cluster, "trainer", NAMESPACE)["spec"]["nodeName"]
        (plugin,) = [p for p in driver.plugin_pods() if p["spec"]["nodeName"] == node]
        config = _prometheus_config(driver, tmp_path, plugin, fake_dcgm)
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = free_port()
        log = (tmp_path / "prometheus.log").open("w")
        proc = subprocess.Popen(
            [
                str(ensure_prometheus(progress=print) / "prometheus"),
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        prom = Prometheus(f"http://127.0.0.1:{port}")
        try:
            # The container is asked of the kubelet at scrape time: a first scrape right after
            # the prepare may not have it yet, a later one must.
            selector = (
                "nvidia_dra_device_allocation_info"
                f'{{namespace="{NAMESPACE}",pod="trainer",container="{CONTAINER}"}}'
            )

            def info() -> list[dict[str, Any]]:
                try:
                    return list(prom.get("/api/v1/query", query=selector)["result"])
                except OSError:
                    return []

            (row,) = cluster.wait_until(
                "the plugin's allocation info of pod trainer", info, timeout=90, interval=1
            )
            labels = row["metric"]
            assert labels["container"] == CONTAINER
            assert labels["claim"].startswith("trainer-gpu")
            assert labels["request"] == "gpu"
            assert labels["UUID"].startswith("GPU-")
            # A full GPU has no instance: Prometheus stores no empty label.
            assert labels.get("GPU_I_ID", "") == ""
            fake_dcgm.uuids.append(labels["UUID"])

            recorded = f'namespace_pod:DCGM_FI_DEV_GPU_UTIL:max{{namespace="{NAMESPACE}"}}'

            def joined() -> list[dict[str, Any]]:
                try:
                    return list(prom.get("/api/v1/query", query=recorded)["result"])
                except OSError:
                    return []

            (sample,) = cluster.wait_until(
                "the DCGM series joined to pod trainer", joined, timeout=90, interval=1
            )
            assert sample["metric"]["pod"] == "trainer"
            # Per pod and device: the rules leave the container out (a GPU shared by a pod's
            # containers is one series).
            assert "container" not in sample["metric"]
            assert sample["metric"]["UUID"] == labels["UUID"]
            assert sample["metric"]["device"] == labels["device"]
            assert float(sample["value"][1]) == UTIL
        except BaseException:
            print((tmp_path / "prometheus.log").read_text()[-4000:])
            print(json.dumps(config, indent=2))
            raise
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()
