"""A seamless plugin upgrade on the harness cluster: ``helm upgrade`` to a new image tag while a
loop creates and deletes pods with GPU claims on one node.

The chart's surge rollout (``maxSurge: 1``, ``maxUnavailable: 0``) starts the new plugin pod
next to the old one, each registered on its own sockets; the test checks that no
``NodePrepareResources`` failed (no ``FailedPrepareDynamicResources`` event, no
``prepare_failed`` in either plugin's log), that every pod of the loop ran and went away (none
stuck), that no claim was prepared twice (one ``prepared`` line per claim over both plugins'
logs), and that the two plugin pods did overlap. Its numbers (failed prepares, pods stuck,
claims prepared twice, upgrade seconds) are recorded for ``make bench BENCH=chaos``
(``chaos_record``), before the assertions, so a failing run still shows them.

Needs the local e2e cluster: the new tag is given to the imported image on every node.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dra_e2e.chaos_results import ChaosRecord
from dra_e2e.errors import KubectlError
from dra_e2e.handle import ClusterHandle
from driver_support import Driver, dump_diagnostics, json_log_lines
from upgrade_support import plugin_pods_on, retag_driver_image, upgrade_reusing_values

pytestmark = pytest.mark.e2e

#: Pods the loop runs at least, before and after the upgrade.
MIN_ROUNDS = 6


@dataclass
class LoopReport:
    """What the pod loop saw."""

    ran: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    #: The most plugin pods seen on the node at once.
    max_plugins: int = 0


def _claim_pod(name: str, namespace: str, node: str) -> str:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "ctr",
                    "image": "ubuntu:22.04",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["bash", "-c", "nvidia-smi -L; sleep 3600"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
        },
    }
    return json.dumps(claim) + "\n---\n" + json.dumps(pod)


def _pod_loop(
    driver: Driver, node: str, namespace: str, upgraded: threading.Event, report: LoopReport
) -> None:
    """Create a claim and a pod, wait until it runs, delete both, wait until gone; again, until
    the upgrade finished and at least :data:`MIN_ROUNDS` pods ran."""
    cluster = driver.cluster
    i = 0
    while not upgraded.is_set() or i < MIN_ROUNDS:
        name = f"surge-{i}"
        manifest = _claim_pod(name, namespace, node)
        cluster.apply(manifest)

        def running(pod: str = name) -> bool:
            # Sampled while waiting too: the overlap of the two plugin pods is short.
            report.max_plugins = max(report.max_plugins, len(plugin_pods_on(driver, node)))
            return _phase(cluster, pod, namespace) == "Running"

        try:
            cluster.wait_until(f"{namespace}/{name} running", running, timeout=120, interval=1)
            report.ran.append(name)
        except Exception:
            report.stuck.append(f"{name}: never ran")
        try:
            cluster.kubectl(
                "delete", "-f", "-", "--grace-period=1", "--wait=true", "--timeout=120s",
                input_text=manifest, timeout=150,
            )  # fmt: skip
        except (KubectlError, subprocess.TimeoutExpired):
            report.stuck.append(f"{name}: not deleted within 120 s")
        i += 1


def _phase(cluster: ClusterHandle, name: str, namespace: str) -> str:
    return str(cluster.kubectl_json("get", "pod", name, "-n", namespace)["status"].get("phase"))


@pytest.fixture
def followed_logs(driver: Driver, tmp_path: Path) -> Iterator[dict[str, Path]]:
    """``kubectl logs -f`` of every plugin pod there is now, to files: the old pods' logs
    are gone from the API once they are deleted."""
    cluster = driver.cluster
    files: dict[str, Path] = {}
    procs = []
    for plugin in driver.plugin_pods():
        name = plugin["metadata"]["name"]
        files[name] = tmp_path / f"{name}.log"
        with files[name].open("w") as out:
            procs.append(
                subprocess.Popen(
                    [
                        str(cluster.kubectl_path), "--kubeconfig", str(cluster.kubeconfig),
                        "logs", "-f", "-c", "gpus", name, "-n", driver.namespace,
                    ],
                    stdout=out, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
    yield files
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=30)


def test_helm_upgrade_to_a_new_image_while_gpu_pods_come_and_go(
    driver: Driver,
    e2e_namespace: str,
    followed_logs: dict[str, Path],
    chaos_record: ChaosRecord,
) -> None:
    cluster = driver.cluster
    if cluster.local is None:
        pytest.skip("re-tags the image on the nodes: local cluster")
    node = sorted(driver.nodes)[0]
    (old_plugin,) = plugin_pods_on(driver, node)
    tag = "surge-upgrade"
    retag_driver_image(cluster, driver.nodes, tag)
    upgraded = threading.Event()
    report = LoopReport()
    loop = threading.Thread(
        target=_pod_loop, args=(driver, node, e2e_namespace, upgraded, report), daemon=True
    )
    loop.start()
    started = time.monotonic()
    try:
        upgrade_reusing_values(driver, {"image.tag": tag})
    finally:
        upgrade_s = time.monotonic() - started
        upgraded.set()
        loop.join(timeout=900)
    try:
        assert not loop.is_alive(), "the pod loop did not finish"
        (new_plugin,) = plugin_pods_on(driver, node)
        failed = cluster.kubectl_json(
            "get", "events", "-n", e2e_namespace,
            "--field-selector", "reason=FailedPrepareDynamicResources",
        )["items"]  # fmt: skip
        old_log = followed_logs[old_plugin["metadata"]["name"]].read_text()
        new_log = cluster.kubectl(
            "logs", "-c", "gpus", new_plugin["metadata"]["name"], "-n", driver.namespace
        )
        events = json_log_lines(old_log) + json_log_lines(new_log)
        prepare_failed = [e for e in events if e.get("event") == "prepare_failed"]
        prepared = [str(e["claim_uid"]) for e in events if e.get("event") == "prepared"]
        chaos_record(
            upgrade_s=round(upgrade_s, 1),
            pods=len(report.ran),
            failed_prepares=len(failed) + len(prepare_failed),
            stuck=len(report.stuck),
            prepared_twice=len(prepared) - len(set(prepared)),
            plugins_at_once=report.max_plugins,
        )

        assert new_plugin["metadata"]["uid"] != old_plugin["metadata"]["uid"]
        assert new_plugin["spec"]["containers"][0]["image"].endswith(f":{tag}")
        assert report.stuck == []
        assert len(report.ran) >= MIN_ROUNDS
        assert report.max_plugins == 2, "the old and the new plugin pod never ran at once"
        assert [e.get("message") for e in failed] == []
        assert prepare_failed == []
        assert len(prepared) == len(set(prepared)), "a claim was prepared twice"
        assert len(prepared) >= len(report.ran)
        # The old plugin handed over: it unregistered and drained, and the new one publishes.
        assert any(e.get("event") == "handover_drain" for e in json_log_lines(old_log))
        driver.wait_for_slices()
    except AssertionError:
        print(dump_diagnostics(driver))
        raise
