"""Chaos on the real harness (issue #23, item 8): faults an operator sees on day two, each
against one chart install that prepares claims of every kind (whole GPU, static MIG,
time-sliced, MPS, VFIO passthrough, compute-domain channel) with the webhook on.

- A webhook rollout while claims are being created refuses none of them (2 replicas, a
  PodDisruptionBudget, ``maxUnavailable: 0``).
- kube-apiserver stopped and started again (same arguments) while the allocation controller,
  the ComputeDomain controller and the plugins run: no component restarts, every Lease is
  renewed, and a new GPU pod and a new ComputeDomain workload start.
- The GPU plugin's container SIGKILLed through containerd (a real PID namespace) with claims of
  every kind prepared: every pod keeps running, the checkpoint and the CDI specs are the same
  after the restart (nothing prepared twice, nothing leaked), the passthrough GPU stays on
  ``vfio-pci`` without being bound again (the same ``driver`` link in the fake host tree, no
  ``vfio_bound`` in the new container's log), new claims of each kind prepare (the channel
  once the held one is released: a node has one channel device), and deleting them all leaves
  no CDI spec behind and every passthrough GPU back on ``nvidia``.

The surge upgrade and the GPU lost at run time of item 8 are tests of their own
(``e2e/tests/driver/test_seamless_upgrade.py``, ``test_health.py``: each needs its own
install), which record their numbers through the ``chaos_record`` fixture too.

One chart install for the module (``driver``). Each test records its numbers (failed calls,
recovery seconds) for ``make bench BENCH=chaos`` (the ``chaos_record`` fixture).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from compute_domain_support import as_list, cd_manifest, wait_ready, worker_pod
from dra_e2e.chaos_results import ChaosRecord
from dra_e2e.errors import KubectlError
from dra_e2e.handle import ClusterHandle
from driver_support import (
    Driver,
    allocated_devices,
    dump_diagnostics,
    install,
    kernel_driver,
    kill_through_containerd,
    pci_driver_link,
    plugin_container,
    pod_claims,
    uninstall,
    wait_running,
    wait_webhook_serving,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.usefixtures("chaos_diagnostics")]

NV = "resource.nvidia.com/v1beta1"
TIME_SLICED = {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}
MPS = {
    "apiVersion": NV,
    "kind": "GpuConfig",
    "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}},
}
#: Claim kind -> (device class, opaque GpuConfig or None).
KINDS: dict[str, tuple[str, dict[str, Any] | None]] = {
    "gpu": ("gpu.nvidia.com", None),
    "mig": ("mig.nvidia.com", None),
    "timesliced": ("gpu.nvidia.com", TIME_SLICED),
    "mps": ("gpu.nvidia.com", MPS),
    "vfio": ("vfio.gpu.nvidia.com", None),
}

VALUES = {
    # GB200s for whole, time-sliced, MPS and passthrough claims (held and fresh: 8) and the
    # compute domain; one GH200 in MIG mode with its MIG devices created at start (static MIG).
    "devices.fakeGpus": "{8xGB200,1xGH200-96GB:mig=7x1g.12gb}",
    "resources.computeDomains.enabled": "true",
    "featureGates.MPSSupport": "true",
    "featureGates.TimeSlicingSettings": "true",
    "featureGates.PassthroughSupport": "true",
    "webhook.enabled": "true",
    # No cert-manager on the harness: the chart makes the CA and the certificate.
    "webhook.tls.mode": "secret",
}


@pytest.fixture(scope="module")
def e2e_cluster(e2e_cluster_own: ClusterHandle) -> ClusterHandle:
    """Every fixture of this module (namespaces, diagnostics) works on its own cluster."""
    return e2e_cluster_own


@pytest.fixture(scope="module")
def driver(
    e2e_cluster_own: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart with every sharing gate, compute domains and the webhook, once it serves."""
    installed = install(e2e_cluster_own, tmp_path_factory.mktemp("chaos-images"), VALUES)
    try:
        if not installed.installed_here:
            pytest.fail("the chaos tests install the chart themselves; unset DRA_E2E_RELEASE")
        wait_webhook_serving(e2e_cluster_own)
        yield installed
    except BaseException:
        print(dump_diagnostics(installed))
        raise
    finally:
        uninstall(installed)


@pytest.fixture
def chaos_diagnostics(request: pytest.FixtureRequest, driver: Driver) -> Iterator[None]:
    """Prints the plugin's logs and recent events when the test failed (``usefixtures``)."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        print(dump_diagnostics(driver))


def _claim(name: str, namespace: str, kind: str) -> dict[str, Any]:
    device_class, config = KINDS[kind]
    devices: dict[str, Any] = {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class}}]
    }
    if config is not None:
        devices["config"] = [
            {"requests": ["gpu"], "opaque": {"driver": "gpu.nvidia.com", "parameters": config}}
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": devices},
    }


def _claim_pod(name: str, namespace: str, kind: str) -> list[dict[str, Any]]:
    """A claim of ``kind`` and a pod that holds it until deleted."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "ctr",
                    "image": "ubuntu:22.04",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["bash", "-c", "trap 'exit 0' TERM; sleep infinity & wait"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        },
    }
    return [_claim(name, namespace, kind), pod]


def _vfio_bus(driver: Driver, node: str, namespace: str, pod: str) -> str:
    """The PCI address of the GPU the pod's passthrough claim holds."""
    (claim,) = pod_claims(driver.cluster, pod, namespace).values()
    (device,) = allocated_devices(claim)
    attrs = driver.devices(node)[device]["attributes"]
    return str(attrs["resource.kubernetes.io/pciBusID"]["string"])


def _every_kind(driver: Driver, namespace: str, suffix: str, domain: str) -> list[str]:
    """Pods holding a claim of every kind, all running; the channel claim is made from the
    ComputeDomain ``domain``'s template (created first when it does not exist: a node serves
    one domain at a time, so later channels join it). The passthrough pod goes first, until
    its GPU's twin ``gpu-N`` left the slice: allocated together, a ``gpu-N`` and its twin
    ``gpu-vfio-M`` (one GPU) could go to two claims, and one prepare would be refused."""
    cluster = driver.cluster
    vfio = f"vfio-{suffix}"
    cluster.apply(as_list(*_claim_pod(vfio, namespace, "vfio")))
    wait_running(cluster, vfio, namespace)
    node = str(cluster.kubectl_json("get", "pod", vfio, "-n", namespace)["spec"]["nodeName"])
    bus = _vfio_bus(driver, node, namespace, vfio)

    def twin_gone() -> bool:
        return not [
            d
            for d in driver.devices(node).values()
            if d["attributes"]["type"]["string"] == "gpu"
            and d["attributes"].get("resource.kubernetes.io/pciBusID", {}).get("string") == bus
        ]

    cluster.wait_until(f"the twin of {vfio}'s GPU out of the slice", twin_gone, timeout=60)
    objects: list[dict[str, Any]] = []
    for kind in KINDS:
        if kind != "vfio":
            objects += _claim_pod(f"{kind}-{suffix}", namespace, kind)
    if not cluster.exists("computedomain", domain, "-n", namespace):
        objects.append(cd_manifest(domain, namespace))
    objects.append(worker_pod(f"channel-{suffix}", namespace, domain))
    cluster.apply(as_list(*objects))
    names = [f"{kind}-{suffix}" for kind in KINDS] + [f"channel-{suffix}"]
    for name in names:
        wait_running(cluster, name, namespace)
    return names


def _containers(driver: Driver, namespace: str, names: list[str]) -> dict[str, tuple[str, int]]:
    """Pod -> (container ID, restart count) of its one container."""
    found = {}
    for name in names:
        pod = driver.cluster.kubectl_json("get", "pod", name, "-n", namespace)
        (status,) = pod["status"]["containerStatuses"]
        assert pod["status"]["phase"] == "Running", (name, pod["status"])
        found[name] = (str(status["containerID"]), int(status["restartCount"]))
    return found


def _restart_counts(driver: Driver) -> dict[str, int]:
    """namespace/pod/container -> restart count of every running pod of the release (a pod
    being deleted, e.g. a webhook replica still draining, is on its way out)."""
    pods = driver.cluster.kubectl_json("get", "pods", "-n", driver.namespace)["items"]
    return {
        f"{p['metadata']['name']}/{s['name']}": int(s["restartCount"])
        for p in pods
        if not p["metadata"].get("deletionTimestamp")
        for s in p["status"].get("containerStatuses", [])
    }


def _checkpoint_claims(driver: Driver, node: str) -> dict[str, Any]:
    doc = json.loads((driver.plugin_dir(node) / "checkpoint.json").read_text())
    return dict(doc.get("claims", {}))


def _cdi_specs(driver: Driver, node: str) -> dict[str, str]:
    """CDI spec file name -> content, every spec of the node."""
    return {p.name: p.read_text() for p in sorted(driver.cdi_dir(node).iterdir()) if p.is_file()}


def _webhook_deployment(driver: Driver) -> str:
    items = driver.cluster.kubectl_json(
        "get", "deployments", "-n", driver.namespace, "-l", "app.kubernetes.io/component=webhook"
    )["items"]
    (deployment,) = items
    return str(deployment["metadata"]["name"])


def test_webhook_rollout_refuses_no_claim_create(
    driver: Driver, e2e_namespace: str, chaos_record: ChaosRecord
) -> None:
    cluster = driver.cluster
    deployment = _webhook_deployment(driver)
    stop = threading.Event()
    created: list[str] = []
    refused: list[str] = []

    def create_claims() -> None:
        # Claims with one of our configs: exactly the writes the webhook is called for.
        while not stop.is_set():
            name = f"during-rollout-{len(created) + len(refused)}"
            manifest = json.dumps(_claim(name, e2e_namespace, "timesliced"))
            try:
                cluster.kubectl("create", "-f", "-", input_text=manifest, timeout=30)
                created.append(name)
            except KubectlError as exc:
                refused.append(f"{name}: {exc.stderr.strip()}")

    loop = threading.Thread(target=create_claims, daemon=True)
    loop.start()
    try:
        time.sleep(3)
        started = time.monotonic()
        cluster.kubectl("rollout", "restart", f"deployment/{deployment}", "-n", driver.namespace)
        cluster.kubectl(
            "rollout", "status", f"deployment/{deployment}", "-n", driver.namespace,
            "--timeout=240s", timeout=260,
        )  # fmt: skip
        rollout_s = time.monotonic() - started

        # The old pods drain (still serving, not ready) after the rollout reports done:
        # keep creating until they are gone, so the whole drain is under load.
        def old_pods_gone() -> bool:
            pods = cluster.kubectl_json(
                "get", "pods", "-n", driver.namespace,
                "-l", "app.kubernetes.io/component=webhook",
            )["items"]  # fmt: skip
            return not [p for p in pods if p["metadata"].get("deletionTimestamp")]

        cluster.wait_until("the old webhook pods drained and gone", old_pods_gone, timeout=90)
        drained_s = time.monotonic() - started
    finally:
        stop.set()
        loop.join(timeout=60)
    chaos_record(
        creates=len(created),
        refused=len(refused),
        rollout_s=round(rollout_s, 1),
        drained_s=round(drained_s, 1),
    )
    assert refused == []
    assert len(created) >= 10, created


def _lease_renewals(driver: Driver) -> dict[str, tuple[str, float]]:
    """Lease -> (holder, renew time in epoch seconds) of the release's namespace."""
    leases = driver.cluster.kubectl_json("get", "leases", "-n", driver.namespace)["items"]
    return {
        lease["metadata"]["name"]: (
            str(lease["spec"].get("holderIdentity") or ""),
            datetime.fromisoformat(lease["spec"]["renewTime"]).timestamp()
            if lease["spec"].get("renewTime")
            else 0.0,
        )
        for lease in leases
    }


def test_apiserver_restart_costs_no_controller_restart_and_new_workloads_start(
    driver: Driver, e2e_namespace: str, chaos_record: ChaosRecord
) -> None:
    cluster = driver.cluster
    before = _restart_counts(driver)
    leases = _lease_renewals(driver)
    assert leases, "the controllers hold Leases in the release namespace"
    stopped_at = time.time()
    started = time.monotonic()
    cluster.restart_apiserver()
    ready_s = time.monotonic() - started

    cluster.apply(as_list(*_claim_pod("after-restart", e2e_namespace, "gpu")))
    wait_running(cluster, "after-restart", e2e_namespace)
    gpu_pod_s = time.monotonic() - started
    cluster.apply(
        as_list(cd_manifest("cd", e2e_namespace), worker_pod("cd-worker", e2e_namespace, "cd"))
    )
    wait_ready(cluster, "cd", e2e_namespace, 1)
    wait_running(cluster, "cd-worker", e2e_namespace)
    domain_s = time.monotonic() - started

    def renewed() -> bool:
        now = _lease_renewals(driver)
        return all(now[name][0] and now[name][1] >= int(stopped_at) for name in leases)

    cluster.wait_until("every Lease renewed after the restart", renewed, timeout=60, interval=2)
    leases_s = time.monotonic() - started
    after = _restart_counts(driver)
    chaos_record(
        apiserver_ready_s=round(ready_s, 1),
        gpu_pod_s=round(gpu_pod_s, 1),
        compute_domain_s=round(domain_s, 1),
        leases_renewed_s=round(leases_s, 1),
        restarts=sum(after.get(k, 0) - v for k, v in before.items()),
    )
    assert {k: after.get(k) for k in before} == before


def _claim_uids(driver: Driver, namespace: str, pods: list[str]) -> set[str]:
    return {
        str(claim["metadata"]["uid"])
        for name in pods
        for claim in pod_claims(driver.cluster, name, namespace).values()
    }


def _specs_of(driver: Driver, node: str, uids: set[str]) -> dict[str, str]:
    """The node's CDI specs of these claims (an earlier test's may still be going away)."""
    return {n: text for n, text in _cdi_specs(driver, node).items() if any(u in n for u in uids)}


def _binding(driver: Driver, node: str, bus_id: str) -> tuple[str | None, int, int]:
    """(kernel driver, inode, mtime) of the GPU's ``driver`` link: a bind makes a new link."""
    link = os.lstat(pci_driver_link(driver, node, bus_id))
    return kernel_driver(driver, node, bus_id), link.st_ino, link.st_mtime_ns


def _plugin_log_events(driver: Driver, pod: str) -> list[str]:
    """The ``event`` of each structured line the pod's current ``gpus`` container logged."""
    text = driver.cluster.kubectl("logs", "-c", "gpus", pod, "-n", driver.namespace)
    events = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and "event" in entry:
            events.append(str(entry["event"]))
    return events


def test_plugin_container_killed_with_every_claim_kind_prepared(
    driver: Driver, e2e_namespace: str, chaos_record: ChaosRecord
) -> None:
    cluster = driver.cluster
    node = sorted(driver.nodes)[0]
    held = _every_kind(driver, e2e_namespace, "held", "cd")
    uids = _claim_uids(driver, e2e_namespace, held)
    containers = _containers(driver, e2e_namespace, held)
    checkpoint = _checkpoint_claims(driver, node)
    specs = _specs_of(driver, node, uids)
    gpu_uids = uids & checkpoint.keys()
    assert len(gpu_uids) == len(KINDS), checkpoint.keys()
    assert len(specs) >= len(uids), "a CDI spec per claim"
    vfio_bus = _vfio_bus(driver, node, e2e_namespace, "vfio-held")
    binding = _binding(driver, node, vfio_bus)
    assert binding[0] == "vfio-pci", binding

    _, container_id, restarts = plugin_container(driver, node)
    started = time.monotonic()
    kill_through_containerd(cluster, node, container_id)

    def serving_again() -> bool:
        name, now_id, now_restarts = plugin_container(driver, node)
        ready = all(
            s.get("ready")
            for p in driver.plugin_pods()
            if p["metadata"]["name"] == name
            for s in p["status"].get("containerStatuses", [])
        )
        return now_restarts > restarts and now_id != container_id and ready

    cluster.wait_until("the plugin container restarted and ready", serving_again, timeout=240)
    recovery_s = time.monotonic() - started

    assert _containers(driver, e2e_namespace, held) == containers, "every pod kept running"
    after = _checkpoint_claims(driver, node)
    assert {u: after.get(u) for u in gpu_uids} == {u: checkpoint[u] for u in gpu_uids}, (
        "no claim prepared again"
    )
    assert after.keys() <= checkpoint.keys(), "nothing else prepared"
    assert _specs_of(driver, node, uids) == specs, "no CDI spec written again or lost"
    assert _binding(driver, node, vfio_bus) == binding, "the VM's GPU not bound again"
    pod_name = plugin_container(driver, node)[0]
    rebinds = {"vfio_bound", "vfio_recovered", "vfio_leftover_released"}
    assert not rebinds & set(_plugin_log_events(driver, pod_name)), "no passthrough recovery"

    # A node has one channel device: the held channel's pod (and with it its claim) goes first.
    cluster.kubectl("delete", "pod", "channel-held", "-n", e2e_namespace, "--wait=true",
                    "--timeout=120s", timeout=150)  # fmt: skip
    fresh = _every_kind(driver, e2e_namespace, "fresh", "cd")
    new_claims_s = time.monotonic() - started
    uids |= _claim_uids(driver, e2e_namespace, fresh)
    fresh_vfio_bus = _vfio_bus(driver, node, e2e_namespace, "vfio-fresh")
    assert fresh_vfio_bus != vfio_bus
    assert len(uids & _checkpoint_claims(driver, node).keys()) == 2 * len(KINDS)

    cluster.kubectl("delete", "pods,resourceclaims,computedomains", "--all", "-n", e2e_namespace,
                    "--grace-period=1", "--wait=true", "--timeout=180s", timeout=200)  # fmt: skip
    cluster.wait_until(
        "every claim's CDI spec removed",
        lambda: not _specs_of(driver, node, uids),
        timeout=120,
        interval=2,
    )
    assert not uids & _checkpoint_claims(driver, node).keys(), "every claim unprepared"
    buses = (vfio_bus, fresh_vfio_bus)
    cluster.wait_until(
        "every passthrough GPU back on nvidia",
        lambda: all(kernel_driver(driver, node, b) == "nvidia" for b in buses),
        timeout=60,
        interval=2,
    )
    chaos_record(
        plugin_recovery_s=round(recovery_s, 1),
        new_claims_s=round(new_claims_s, 1),
        pods=len(held) + len(fresh),
        plugin_restarts=plugin_container(driver, node)[2] - restarts,
    )
