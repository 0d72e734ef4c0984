"""Device health end to end: a fake XID on an allocated GPU reaches the pod and the slice.

The plugin's health monitor turns the XID into a device taint in the ResourceSlice and an
``Unhealthy`` device in the DRA health stream, which the kubelet shows in the pod's
``status.containerStatuses[].allocatedResourcesStatus`` (KEP-4680; ``ResourceHealthStatus``
is on in the harness). With ``HEALTH_RECOVERY_PERIOD`` set, the device is healthy again once
that long passes without a further event: the taint goes and the status says ``Healthy``.
The XID is injected into the fake GPUs' state file on the node, the way ``dra-nvlib`` fault
injection works on a fake node.

A lost GPU (``dra-nvlib lose-gpu``: Xid 79, fallen off the bus) costs that GPU only, whether
it is lost while the plugin runs (tainted ``gpu-lost``, the plugin and the other pods carry
on) or before the plugin starts (it starts and publishes the others). These two are also
day-two chaos scenarios (issue #23, item 8): they record their numbers (seconds until the
taint or the republished slice, until a new GPU pod runs; failed prepares, pods stuck, plugin
restarts) for ``make bench BENCH=chaos`` (``chaos_record``).
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dra_e2e.chaos_results import ChaosRecord
from dra_e2e.errors import KubectlError
from dra_e2e.handle import ClusterHandle
from driver_support import (
    DRIVER,
    Driver,
    allocated_devices,
    applied,
    as_json,
    plugin_container,
    pod,
    pod_claims,
    uninstall,
    wait_running,
)
from driver_support import install as install_driver

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

RECOVERY_S = 15
DRA_NVLIB = Path(sys.executable).with_name("dra-nvlib")


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart on fake GPUs, its devices healthy again after ``RECOVERY_S`` quiet seconds."""
    if e2e_cluster.local is None:
        pytest.skip("XIDs are injected into the local node's fake GPU state")
    installed = install_driver(
        e2e_cluster,
        tmp_path_factory.mktemp("driver-images"),
        values={
            "kubeletPlugin.containers.gpus.env[0].name": "HEALTH_RECOVERY_PERIOD",
            "kubeletPlugin.containers.gpus.env[0].value": f"{RECOVERY_S}s",
        },
    )
    yield installed
    uninstall(installed)


def _manifest(namespace: str, name: str) -> str:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        ]}}},
    }  # fmt: skip
    workload = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
            "containers": [{
                "name": "ctr",
                "image": "docker.io/dra-e2e/busybox:1.35",
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 9999 & wait"],
                "resources": {"claims": [{"name": "gpu"}]},
            }],
        },
    }  # fmt: skip
    return as_json({"apiVersion": "v1", "kind": "List", "items": [template, workload]})


def _health(cluster: ClusterHandle, name: str, namespace: str, device: str) -> str | None:
    """The device's health in the pod's ``allocatedResourcesStatus`` (None: not listed).

    The kubelet names a device by its first CDI device ID (``<kind>=<claimUID>-<device>``),
    else ``<driver>/<pool>/<device>``.
    """
    for status in pod(cluster, name, namespace)["status"].get("containerStatuses", []):
        for entry in status.get("allocatedResourcesStatus") or []:
            for resource in entry.get("resources") or []:
                resource_id = str(resource.get("resourceID", ""))
                if resource_id.endswith((f"-{device}", f"/{device}")):
                    return str(resource.get("health"))
    return None


def _taints(driver: Driver, node: str, device: str) -> list[dict[str, Any]]:
    return list(driver.devices(node)[device].get("taints", []))


def test_xid_on_an_allocated_gpu_reaches_pod_status_and_slice_and_recovery_clears_both(
    driver: Driver, e2e_namespace: str
) -> None:
    cluster, node = driver.cluster, driver.nodes[0]
    name = f"health-{uuid.uuid4().hex[:6]}"
    with applied(cluster, _manifest(e2e_namespace, name)):
        wait_running(cluster, name, e2e_namespace)
        (claim,) = pod_claims(cluster, name, e2e_namespace).values()
        (device,) = allocated_devices(claim)
        gpu_uuid = driver.devices(node)[device]["attributes"]["uuid"]["string"]
        cluster.wait_until(
            f"{device} listed Healthy in the pod's allocatedResourcesStatus",
            lambda: _health(cluster, name, e2e_namespace, device) == "Healthy",
            timeout=60,
            interval=1,
        )
        assert _taints(driver, node, device) == []
        subprocess.run(
            [str(DRA_NVLIB), "--backend", "fake", "--node", node,
             "--state", str(driver.plugin_dir(node) / "fake-gpus.json"),
             "inject-xid", gpu_uuid, "79"],
            check=True, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        cluster.wait_until(
            f"{device} Unhealthy in the pod's status and tainted in the slice",
            lambda: (
                _health(cluster, name, e2e_namespace, device) == "Unhealthy"
                and any(t["key"] == f"{DRIVER}/xid" for t in _taints(driver, node, device))
            ),
            timeout=60,
            interval=1,
        )
        (taint,) = _taints(driver, node, device)
        assert (taint["key"], taint.get("value"), taint["effect"]) == (
            f"{DRIVER}/xid",
            "79",
            "NoSchedule",
        )
        # NoSchedule: the running pod stays, as on a real GPU whose XID needs a look.
        assert pod(cluster, name, e2e_namespace)["status"]["phase"] == "Running"
        cluster.wait_until(
            f"{device} healthy again {RECOVERY_S}s after the XID",
            lambda: (
                _health(cluster, name, e2e_namespace, device) == "Healthy"
                and _taints(driver, node, device) == []
            ),
            timeout=RECOVERY_S + 60,
            interval=1,
        )


def _plugin_pod(driver: Driver, node: str) -> dict[str, Any] | None:
    for p in driver.plugin_pods():
        if p["spec"].get("nodeName") == node and not p["metadata"].get("deletionTimestamp"):
            return p
    return None


def _restart_plugin(driver: Driver, node: str) -> None:
    """Delete the node's plugin pod and wait for its replacement to run and be ready."""
    old = _plugin_pod(driver, node)
    assert old is not None
    driver.cluster.kubectl(
        "delete", "pod", old["metadata"]["name"], "-n", driver.namespace, "--wait=true"
    )

    def ready() -> bool:
        new = _plugin_pod(driver, node)
        if new is None or new["metadata"]["uid"] == old["metadata"]["uid"]:
            return False
        statuses = new["status"].get("containerStatuses") or []
        return bool(statuses) and all(s.get("ready") for s in statuses)

    driver.cluster.wait_until(f"a new plugin pod ready on {node}", ready, timeout=180, interval=2)


def _lose_gpu(driver: Driver, node: str, gpu_uuid: str) -> None:
    """Xid 79 on a fake GPU: from now on NVML calls on it fail with GPU_IS_LOST."""
    subprocess.run(
        [str(DRA_NVLIB), "--backend", "fake", "--node", node,
         "--state", str(driver.plugin_dir(node) / "fake-gpus.json"), "lose-gpu", gpu_uuid],
        check=True, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def _healthy_fleet_again(driver: Driver, node: str, devices: set[str]) -> None:
    """Back to a healthy fleet for the tests after this one: a fresh state file, a restarted
    plugin, every device published again."""
    state = driver.plugin_dir(node) / "fake-gpus.json"
    for path in (state, state.with_name("fake-gpus.json.lock")):
        path.unlink(missing_ok=True)
    _restart_plugin(driver, node)
    driver.cluster.wait_until(
        f"{node}'s slice with every GPU again",
        lambda: set(driver.devices(node)) == devices,
        timeout=120,
        interval=2,
    )


def _gpu_devices(devices: dict[str, dict[str, Any]]) -> list[str]:
    return sorted(n for n, d in devices.items() if d["attributes"]["type"]["string"] == "gpu")


def _failed_prepares(cluster: ClusterHandle, namespace: str) -> list[str]:
    """Messages of the namespace's ``FailedPrepareDynamicResources`` events."""
    return [
        str(e.get("message"))
        for e in cluster.kubectl_json(
            "get", "events", "-n", namespace,
            "--field-selector", "reason=FailedPrepareDynamicResources",
        )["items"]
    ]  # fmt: skip


def _deleted(cluster: ClusterHandle, manifest: str) -> bool:
    """Delete what ``manifest`` created and wait; ``False``: still there after 120 s."""
    try:
        cluster.kubectl(
            "delete", "-f", "-", "--grace-period=1", "--wait=true", "--timeout=120s",
            input_text=manifest, timeout=150,
        )  # fmt: skip
    except (KubectlError, subprocess.TimeoutExpired):
        return False
    return True


def test_gpu_lost_at_run_time_costs_that_gpu_only(
    driver: Driver, e2e_namespace: str, chaos_record: ChaosRecord
) -> None:
    """Xid 79 on an idle GPU while the plugin runs and a pod holds another: the lost GPU is
    tainted ``gpu-lost`` (NoExecute) in the slice, nothing else is, the pod keeps running,
    the plugin container is not restarted, a new GPU pod runs on a healthy GPU, and both pods
    go away when deleted."""
    cluster, node = driver.cluster, driver.nodes[0]
    before = driver.devices(node)
    held, fresh = f"held-{uuid.uuid4().hex[:6]}", f"fresh-{uuid.uuid4().hex[:6]}"
    held_manifest, fresh_manifest = _manifest(e2e_namespace, held), _manifest(e2e_namespace, fresh)
    try:
        cluster.apply(held_manifest)
        wait_running(cluster, held, e2e_namespace)
        (claim,) = pod_claims(cluster, held, e2e_namespace).values()
        (held_device,) = allocated_devices(claim)
        lost_name = [n for n in _gpu_devices(before) if n != held_device][-1]
        _, container_id, restarts = plugin_container(driver, node)

        started = time.monotonic()
        _lose_gpu(driver, node, before[lost_name]["attributes"]["uuid"]["string"])
        cluster.wait_until(
            f"{lost_name} tainted gpu-lost in {node}'s slice",
            lambda: any(t["key"] == f"{DRIVER}/gpu-lost" for t in _taints(driver, node, lost_name)),
            timeout=90,
            interval=1,
        )
        taint_s = time.monotonic() - started
        cluster.apply(fresh_manifest)
        wait_running(cluster, fresh, e2e_namespace)
        new_pod_s = time.monotonic() - started
        (fresh_claim,) = pod_claims(cluster, fresh, e2e_namespace).values()
        fresh_devices = allocated_devices(fresh_claim)
        after = driver.devices(node)
        held_status = pod(cluster, held, e2e_namespace)["status"]
        _, now_id, now_restarts = plugin_container(driver, node)
        failed = _failed_prepares(cluster, e2e_namespace)
        stuck = [m for m in (held_manifest, fresh_manifest) if not _deleted(cluster, m)]
        chaos_record(
            taint_s=round(taint_s, 1),
            new_pod_s=round(new_pod_s, 1),
            failed_prepares=len(failed),
            stuck=len(stuck),
            restarts=now_restarts - restarts,
        )

        (taint,) = after[lost_name]["taints"]
        assert (taint["key"], taint["effect"]) == (f"{DRIVER}/gpu-lost", "NoExecute")
        assert [n for n in after if n != lost_name and after[n].get("taints")] == []
        assert lost_name not in fresh_devices
        assert held_status["phase"] == "Running"
        assert [s["restartCount"] for s in held_status["containerStatuses"]] == [0]
        assert (now_id, now_restarts) == (container_id, restarts), "the plugin kept running"
        assert failed == []
        assert stuck == []
    finally:
        for manifest in (held_manifest, fresh_manifest):
            _deleted(cluster, manifest)  # after a failure: nothing left on the lost fleet
        _healthy_fleet_again(driver, node, set(before))


def test_gpu_lost_before_plugin_start_costs_that_gpu_only(
    driver: Driver, e2e_namespace: str, chaos_record: ChaosRecord
) -> None:
    """Xid 79 before a plugin restart: the plugin starts (no CrashLoopBackOff), publishes the
    other GPUs untainted and leaves the lost one out (NVML cannot identify it in a fresh
    process), and a new GPU pod runs on a healthy GPU."""
    cluster, node = driver.cluster, driver.nodes[0]
    before = driver.devices(node)
    lost_name = _gpu_devices(before)[-1]
    lost_uuid = before[lost_name]["attributes"]["uuid"]["string"]
    try:
        _lose_gpu(driver, node, lost_uuid)
        started = time.monotonic()
        _restart_plugin(driver, node)
        plugin_s = time.monotonic() - started
        expected = set(before) - {lost_name}
        cluster.wait_until(
            f"{node}'s slice republished without {lost_name}",
            lambda: set(driver.devices(node)) == expected,
            timeout=120,
            interval=2,
        )
        republished_s = time.monotonic() - started
        after = driver.devices(node)
        name = f"lost-{uuid.uuid4().hex[:6]}"
        manifest = _manifest(e2e_namespace, name)
        cluster.apply(manifest)
        wait_running(cluster, name, e2e_namespace)
        new_pod_s = time.monotonic() - started
        (claim,) = pod_claims(cluster, name, e2e_namespace).values()
        devices = allocated_devices(claim)
        failed = _failed_prepares(cluster, e2e_namespace)
        stuck = not _deleted(cluster, manifest)
        chaos_record(
            plugin_ready_s=round(plugin_s, 1),
            republished_s=round(republished_s, 1),
            new_pod_s=round(new_pod_s, 1),
            failed_prepares=len(failed),
            stuck=int(stuck),
            restarts=plugin_container(driver, node)[2],
        )

        assert all(not after[n].get("taints") for n in expected)
        assert devices != [lost_name]
        assert failed == []
        assert not stuck
        assert plugin_container(driver, node)[2] == 0, "the new plugin never crashed"
    finally:
        _healthy_fleet_again(driver, node, set(before))
