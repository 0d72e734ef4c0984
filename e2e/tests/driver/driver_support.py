"""What the driver scenarios share: installing the chart on the cluster under test, and waiting
for pods, claims and slices.

Against the local e2e cluster the driver is installed the way ``e2e-cluster install-driver`` and
the demo install it (``dra_e2e.driver_install``: images built without a registry and imported
into every node, the chart with its default kubelet and CDI paths, the plugin up on every node).
Against an existing cluster (``--kubeconfig`` / ``$DRA_E2E_KUBECONFIG``) with
``DRA_E2E_RELEASE=<namespace>/<release>`` set (kind/up.sh does this), the installed release is
used as it is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from dra_e2e import chart
from dra_e2e.chart import CHART, helm_path, run_helm
from dra_e2e.configs import CDI_DIR, KUBELET_ROOT
from dra_e2e.driver_install import install_driver
from dra_e2e.errors import KubectlError
from dra_e2e.handle import ClusterHandle

__all__ = [
    "CHART",
    "DRIVER",
    "Driver",
    "allocated_devices",
    "applied",
    "assert_unprepared",
    "cdi_specs_of",
    "checkpoint_claims",
    "container_state",
    "dump_diagnostics",
    "events_for",
    "exists",
    "gpus_in_log",
    "helm_path",
    "install",
    "json_log_lines",
    "kernel_driver",
    "own_install",
    "pci_driver_link",
    "pod",
    "pod_claims",
    "run_helm",
    "smi_lines",
    "uninstall",
    "wait_for_event",
    "wait_gone",
    "wait_running",
    "wait_webhook_serving",
]

DRIVER = "gpu.nvidia.com"
NV = "resource.nvidia.com/v1beta1"
#: A mixed node: GPUs of 40 GiB (A100) and 24 GiB (L4), so memory selectors split them.
FAKE_GPUS = tuple(os.environ.get("DRA_E2E_FAKE_GPUS", "4xA100-40GB,4xL4").split(","))
SMI_LINE = re.compile(r"^GPU (\d+): (.+) \(UUID: (GPU-[0-9a-f-]+)\)$")


@dataclass
class Driver:
    """The installed driver under test."""

    cluster: ClusterHandle
    namespace: str
    release: str
    nodes: list[str]
    #: Node name -> where this machine sees the node's kubelet root and CDI dir; empty for a
    #: remote cluster.
    node_dirs: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    install_output: str = ""
    installed_here: bool = False

    @property
    def local(self) -> bool:
        """Whether the node directories are on this machine (the local e2e cluster)."""
        return bool(self.node_dirs)

    def plugin_dir(self, node: str) -> Path:
        """``<kubelet root>/plugins/gpu.nvidia.com`` of a local node."""
        return self.node_dirs[node][0] / "plugins" / DRIVER

    def cdi_dir(self, node: str) -> Path:
        """The CDI spec directory of a local node."""
        return self.node_dirs[node][1]

    def plugin_pods(self) -> list[dict[str, Any]]:
        """The kubelet plugin's pods."""
        selector = "app.kubernetes.io/component=kubelet-plugin"
        data = self.cluster.kubectl_json("get", "pods", "-n", self.namespace, "-l", selector)
        return list(data["items"])

    def slices(self, node: str | None = None) -> list[dict[str, Any]]:
        """This driver's ResourceSlices (of one node)."""
        items = self.cluster.kubectl_json("get", "resourceslices")["items"]
        return [
            s
            for s in items
            if s["spec"]["driver"] == DRIVER and (node is None or s["spec"].get("nodeName") == node)
        ]

    def devices(self, node: str) -> dict[str, dict[str, Any]]:
        """Device name -> device of a node's published slices."""
        return {d["name"]: d for s in self.slices(node) for d in s["spec"].get("devices", [])}

    def wait_for_slices(self, *, timeout: float = 180) -> None:
        """Until every node has a slice with devices."""
        self.cluster.wait_until(
            "ResourceSlices of gpu.nvidia.com on every node",
            lambda: all(self.devices(n) for n in self.nodes),
            timeout=timeout,
            interval=2,
        )


def install(
    cluster: ClusterHandle, workdir: Path, values: Mapping[str, str] | None = None
) -> Driver:
    """Installs the chart on fake GPUs (or adopts ``$DRA_E2E_RELEASE``); waits for slices.

    ``values`` are ``--set`` values over the local defaults (feature gates, sharing).
    """
    nodes = cluster.node_names()
    adopted = os.environ.get("DRA_E2E_RELEASE")
    if adopted:
        namespace, _, release = adopted.partition("/")
        driver = Driver(cluster, namespace, release, nodes)
        driver.wait_for_slices()
        return driver
    if cluster.local is None:
        raise RuntimeError(
            "an existing cluster (--kubeconfig) needs the driver installed first; set "
            "DRA_E2E_RELEASE=<namespace>/<release> (kind/up.sh does both)"
        )
    installed = install_driver(cluster.local, sets=values, fake_gpus=FAKE_GPUS, workdir=workdir)
    return Driver(
        cluster,
        installed.namespace,
        installed.release,
        nodes,
        node_dirs={
            n.name: (n.mounts.on_host(KUBELET_ROOT), n.mounts.on_host(CDI_DIR))
            for n in cluster.local.state.nodes
        },
        install_output=installed.helm_output,
        installed_here=True,
    )


@contextmanager
def own_install(
    cluster: ClusterHandle, workdir: Path, values: Mapping[str, str], *, needs: str
) -> Iterator[Driver]:
    """The chart installed with ``values`` for one module, uninstalled after it.

    A module whose values an adopted release (``$DRA_E2E_RELEASE``) may lack is skipped there;
    ``needs`` says what it needs, for the skip reason.
    """
    if os.environ.get("DRA_E2E_RELEASE"):
        pytest.skip(f"needs its own install with {needs} (DRA_E2E_RELEASE is set)")
    installed = install(cluster, workdir, values=values)
    try:
        yield installed
    finally:
        uninstall(installed)


def uninstall(driver: Driver) -> None:
    """Removes a release this session installed."""
    if driver.installed_here:
        chart.uninstall(
            driver.cluster.kubeconfig, release=driver.release, namespace=driver.namespace
        )


def forget_fake_fleet(cluster: ClusterHandle) -> None:
    """Removes the fake GPU state of every node of a cluster this session runs.

    The plugin refuses a state file written for another fleet, so a module that installs the
    chart with its own ``devices.fakeGpus`` on the session's cluster calls this before its
    install and after its uninstall (other modules then start from their own fleet).
    """
    if cluster.local is None or os.environ.get("DRA_E2E_RELEASE"):
        return
    # Both plugins keep a fleet: the compute-domain plugin's refuses the next install's fleet
    # just as the GPU plugin's does (a CD install followed by one with another fleet never
    # became ready).
    for node in cluster.local.state.nodes:
        plugins = node.mounts.on_host(KUBELET_ROOT) / "plugins"
        for driver in ("gpu.nvidia.com", "compute-domain.nvidia.com"):
            for name in ("fake-gpus.json", "fake-gpus.json.lock"):
                (plugins / driver / name).unlink(missing_ok=True)


def dump_diagnostics(driver: Driver) -> str:
    """Plugin logs and recent events, for a failed scenario's report."""
    parts: list[str] = []
    for pod in driver.plugin_pods():
        name = pod["metadata"]["name"]
        try:
            logs = driver.cluster.kubectl("logs", name, "-n", driver.namespace, "--tail=60")
        except Exception as exc:
            logs = f"(no logs: {exc})"
        parts.append(f"--- plugin pod {name}:\n{logs}")
    try:
        events = driver.cluster.kubectl(
            "get", "events", "-A", "--sort-by=.lastTimestamp", "--no-headers"
        )
        parts.append("--- events:\n" + "\n".join(events.splitlines()[-40:]))
    except Exception as exc:
        parts.append(f"(no events: {exc})")
    return "\n".join(parts)


def json_log_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects of a component's log (our components log one per line), in order."""
    out = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def pod(cluster: ClusterHandle, name: str, namespace: str) -> dict[str, Any]:
    """The pod object."""
    return dict(cluster.kubectl_json("get", "pod", name, "-n", namespace))


def wait_running(
    cluster: ClusterHandle, name: str, namespace: str, *, timeout: float = 180
) -> None:
    """Until every container of the pod runs; fails early when the pod failed."""

    def running() -> bool:
        status = pod(cluster, name, namespace)["status"]
        assert status.get("phase") != "Failed", status
        containers = status.get("containerStatuses", [])
        return bool(containers) and all("running" in c.get("state", {}) for c in containers)

    cluster.wait_until(f"pod {namespace}/{name} to run", running, timeout=timeout, interval=2)


def pod_claims(cluster: ClusterHandle, name: str, namespace: str) -> dict[str, dict[str, Any]]:
    """Pod claim name -> the ResourceClaim object it resolved to."""
    statuses = pod(cluster, name, namespace)["status"].get("resourceClaimStatuses", [])
    spec = pod(cluster, name, namespace)["spec"].get("resourceClaims", [])
    names = {s["name"]: s.get("resourceClaimName") for s in statuses}
    for entry in spec:
        if entry.get("resourceClaimName"):
            names[entry["name"]] = entry["resourceClaimName"]
    return {
        pod_claim: dict(cluster.kubectl_json("get", "resourceclaim", claim, "-n", namespace))
        for pod_claim, claim in names.items()
        if claim
    }


def allocated_devices(claim: dict[str, Any]) -> list[str]:
    """Device names of a claim's allocation results (this driver's)."""
    results = claim["status"]["allocation"]["devices"]["results"]
    return [r["device"] for r in results if r["driver"] == DRIVER]


def smi_lines(log: str) -> list[tuple[int, str, str]]:
    """``(index, product name, UUID)`` of each ``nvidia-smi -L`` GPU line in a log."""
    out = []
    for line in log.splitlines():
        m = SMI_LINE.match(line.strip())
        if m:
            out.append((int(m.group(1)), m.group(2), m.group(3)))
    return out


def events_for(cluster: ClusterHandle, kind: str, name: str, namespace: str) -> list[str]:
    """``reason: message`` of the events of one object."""
    data = cluster.kubectl_json(
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        f"involvedObject.kind={kind},involvedObject.name={name}",
    )
    return [f"{e.get('reason')}: {e.get('message')}" for e in data["items"]]


def wait_for_event(
    cluster: ClusterHandle, pod_name: str, namespace: str, needle: str, *, timeout: float = 180
) -> str:
    """The first event of the pod whose ``reason: message`` contains ``needle`` (waits)."""

    def found() -> str:
        for event in events_for(cluster, "Pod", pod_name, namespace):
            if needle in event:
                return event
        return ""

    return str(
        cluster.wait_until(f"event {needle!r} on {namespace}/{pod_name}", found, timeout=timeout)
    )


def wait_gone(
    cluster: ClusterHandle, what: str, check: Callable[[], bool], timeout: float = 120
) -> None:
    """Until ``check()`` is true (something was removed)."""
    cluster.wait_until(what, check, timeout=timeout, interval=2)


def exists(cluster: ClusterHandle, *args: str) -> bool:
    """Whether ``kubectl get ARGS`` finds the object."""
    return cluster.exists(*args)


@contextmanager
def applied(
    cluster: ClusterHandle, manifest: str, *, namespaces: tuple[str, ...] = ()
) -> Iterator[None]:
    """Applies a manifest; deletes what it created afterwards (pods without grace)."""
    cluster.apply(manifest)
    try:
        yield
    finally:
        # Best effort: a test that failed must still get to report its own error.
        with suppress(KubectlError, subprocess.TimeoutExpired):
            cluster.kubectl(
                "delete", "-f", "-", "--ignore-not-found", "--grace-period=1",
                "--wait=true", "--timeout=120s", input_text=manifest, timeout=150,
            )  # fmt: skip
        for ns in namespaces:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and exists(cluster, "namespace", ns):
                time.sleep(2)


def _webhook_probe() -> str:
    """A claim the webhook refuses (an unknown sharing strategy), for a server-side dry run."""
    parameters = {"apiVersion": NV, "kind": "GpuConfig", "sharing": {"strategy": "Bogus"}}
    return as_json(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "webhook-probe", "namespace": "default"},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}],
                    "config": [
                        {
                            "requests": ["gpu"],
                            "opaque": {"driver": DRIVER, "parameters": parameters},
                        }
                    ],
                }
            },
        }
    )


def wait_webhook_serving(cluster: ClusterHandle, *, timeout: float = 120) -> None:
    """Until the chart's webhook refuses a bad config.

    Ready pods are not yet a webhook the API server reaches (its endpoint resolver learns the
    address from the Service's endpoints); a server-side dry run goes through admission
    without storing anything.
    """
    probe = _webhook_probe()

    def serving() -> bool:
        try:
            cluster.kubectl("apply", "--dry-run=server", "-f", "-", input_text=probe)
        except KubectlError as exc:
            if "denied the request" in exc.stderr:
                return True
            raise
        return False

    cluster.wait_until("the webhook to refuse a bad config", serving, timeout=timeout)


def pci_driver_link(driver: Driver, node: str, bus_id: str) -> Path:
    """The ``driver`` link of a GPU in a local node's fake host tree (``sys/bus/pci``): which
    kernel driver holds it; a bind makes the link anew."""
    devices = driver.plugin_dir(node) / "fake-gpus.host" / "sys" / "bus" / "pci" / "devices"
    return devices / bus_id / "driver"


def kernel_driver(driver: Driver, node: str, bus_id: str) -> str | None:
    """The kernel driver of a GPU of a local node's fake host tree (``None``: unbound)."""
    try:
        return Path(os.readlink(pci_driver_link(driver, node, bus_id))).name
    except OSError:
        return None


def as_json(obj: Any) -> str:
    """JSON text of an object (manifests for ``kubectl apply``)."""
    return json.dumps(obj)


def plugin_container(driver: Driver, node: str) -> tuple[str, str, int]:
    """(pod name, containerd ID, restart count) of the node's ``gpus`` container."""
    for item in driver.plugin_pods():
        if item["spec"].get("nodeName") != node:
            continue
        for status in item["status"].get("containerStatuses", []):
            if status["name"] == "gpus" and status.get("containerID"):
                cid = str(status["containerID"]).removeprefix("containerd://")
                return item["metadata"]["name"], cid, int(status["restartCount"])
    raise AssertionError(f"no running gpus container on {node}")


def kill_through_containerd(cluster: ClusterHandle, node: str, container_id: str) -> None:
    """SIGKILL the container's task: the kernel ends its whole PID namespace."""
    local = cluster.local
    if local is None:
        pytest.fail("killing a container through containerd needs the local e2e cluster")
    target = next(n for n in local.state.nodes if n.name == node)
    subprocess.run(
        [str(local.bins.ctr), "--address", str(target.paths.containerd_socket),
         "--namespace", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", container_id],
        check=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def assert_unprepared(driver: Driver, node: str, claim_uid: str) -> None:
    """Until the claim's CDI spec is gone; then its checkpoint entry and claim directory
    must be gone too (the plugin unprepared it)."""
    cdi = driver.cdi_dir(node)
    wait_gone(
        driver.cluster,
        f"CDI spec of claim {claim_uid} removed",
        lambda: not any(claim_uid in p.name for p in cdi.iterdir()),
    )
    checkpoint = driver.plugin_dir(node) / "checkpoint.json"
    assert claim_uid not in checkpoint.read_text(), "checkpoint entry removed"
    assert not (driver.plugin_dir(node) / "claims" / claim_uid).exists()


def gpus_in_log(cluster: ClusterHandle, name: str, namespace: str, container: str) -> list[str]:
    """The GPU UUIDs ``nvidia-smi -L`` printed in a container's log (waits for the log)."""
    logs = cluster.wait_until(
        f"nvidia-smi -L in {namespace}/{name}/{container}",
        lambda: cluster.kubectl("logs", name, "-n", namespace, "-c", container),
        timeout=60,
    )
    return [uuid_ for _, _, uuid_ in smi_lines(logs)]


def checkpoint_claims(driver: Driver, node: str) -> dict[str, Any]:
    """The plugin checkpoint's claims (uid -> entry) of a local node."""
    doc = json.loads((driver.plugin_dir(node) / "checkpoint.json").read_text())
    return dict(doc.get("claims", {}))


def cdi_specs_of(driver: Driver, node: str, claim_uid: str) -> dict[str, str]:
    """File name -> content of the CDI specs that mention a claim."""
    return {
        p.name: p.read_text()
        for p in sorted(driver.cdi_dir(node).iterdir())
        if p.is_file() and claim_uid in p.read_text()
    }


def container_state(cluster: ClusterHandle, name: str, namespace: str) -> tuple[str, int]:
    """The pod's one container: its ID and restart count (a new ID: it was started again)."""
    (status,) = pod(cluster, name, namespace)["status"]["containerStatuses"]
    return str(status["containerID"]), int(status["restartCount"])
