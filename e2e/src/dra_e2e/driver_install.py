"""This driver on every node of the local cluster: ``e2e-cluster install-driver``, and the one way
the demo and the driver tests install it.

``install_driver`` builds the driver image and the walkthrough's workload image without a
registry (``images/build_image.py``), imports both into every node, runs the chart's ``helm
upgrade --install`` with the local values (fake GPUs, images never pulled; the chart's default
kubelet and CDI paths, which every node has in its mount namespace) plus the caller's values files
and ``--set`` overrides, and waits until the kubelet plugin is Running and Ready on every node and
every node has published its ``gpu.nvidia.com`` ResourceSlices. A second call upgrades the
release in place. The fake GPUs of each node get UUIDs derived from the node's name
(``dra_nvlib.identity``), so they differ between nodes.

Deciding what is missing (``parse_sets``, ``nodes_without_ready_plugin``,
``nodes_without_slices``) is pure; ``install_driver`` does the I/O.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dra_e2e import chart
from dra_e2e.errors import E2EError, KubectlError
from dra_e2e.images import build_project_image

if TYPE_CHECKING:
    from dra_e2e.cluster import Cluster

Progress = Callable[[str], None]
DRIVER = "gpu.nvidia.com"
PLUGIN_SELECTOR = "app.kubernetes.io/component=kubelet-plugin"
IMAGES = ("driver", "workload")


class InstallDriverError(E2EError):
    """The driver did not come up: names what is missing and on which nodes."""

    def __init__(self, what: str, nodes: Sequence[str], detail: str = "") -> None:
        self.what = what
        self.nodes = list(nodes)
        extra = f": {detail}" if detail else ""
        super().__init__(f"install-driver: {what} missing on {', '.join(self.nodes)}{extra}")


class BadSetError(E2EError):
    """A ``--set`` argument is not ``KEY=VALUE``."""

    def __init__(self, item: str) -> None:
        self.item = item
        super().__init__(f"install-driver: --set {item!r} is not KEY=VALUE")


@dataclass(frozen=True)
class InstalledDriver:
    """A release of the chart on the local cluster, up on every node."""

    release: str
    namespace: str
    nodes: tuple[str, ...]
    values: dict[str, str]
    helm_output: str


def _quiet(_: str) -> None:
    return None


def parse_sets(items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (helm's ``--set`` syntax, the value kept verbatim) as a dict; a
    later key wins, as in helm."""
    sets: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadSetError(item)
        sets[key.strip()] = value
    return sets


def install_values(sets: Mapping[str, str], *, fake_gpus: Sequence[str] = ()) -> dict[str, str]:
    """The local values (:func:`dra_e2e.chart.local_values`) overridden by ``sets``."""
    return {**chart.local_values(fake_gpus=fake_gpus), **sets}


def publishes_gpus(values: Mapping[str, str]) -> bool:
    """Whether a release with ``values`` runs the GPU plugin (``resources.gpus.enabled``)."""
    return values.get("resources.gpus.enabled", "true").strip().lower() != "false"


def _ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status", {})
    if status.get("phase") != "Running" or pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions", [])}
    return conditions.get("Ready") == "True"


def nodes_without_ready_plugin(
    pods: Sequence[Mapping[str, Any]], nodes: Sequence[str]
) -> list[str]:
    """The nodes among ``nodes`` where none of ``pods`` (the plugin's) is Running and Ready."""
    ready = {p.get("spec", {}).get("nodeName") for p in pods if _ready(p)}
    return [n for n in nodes if n not in ready]


def plugin_states(pods: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Node -> why its plugin pod is not Ready yet (``CrashLoopBackOff``, ``Pending`` ...), for
    the error that names the nodes; the last termination message comes with it when there is
    one (the plugin writes its fatal error there)."""
    states: dict[str, str] = {}
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName") or "(unscheduled)"
        status = pod.get("status", {})
        reason = str(status.get("phase", "Unknown"))
        for container in status.get("containerStatuses", []):
            waiting = container.get("state", {}).get("waiting", {})
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            last = container.get("lastState", {}).get("terminated", {})
            if last.get("message"):
                reason += f" ({str(last['message']).strip().splitlines()[-1]})"
        states[node] = reason
    return states


def nodes_without_slices(
    slices: Sequence[Mapping[str, Any]], nodes: Sequence[str], *, driver: str = DRIVER
) -> list[str]:
    """The nodes among ``nodes`` without a ResourceSlice of ``driver`` that has devices."""
    published = {
        s["spec"].get("nodeName")
        for s in slices
        if s.get("spec", {}).get("driver") == driver and s["spec"].get("devices")
    }
    return [n for n in nodes if n not in published]


def install_driver(
    cluster: Cluster,
    *,
    sets: Mapping[str, str] | None = None,
    values_files: Sequence[Path] = (),
    fake_gpus: Sequence[str] = (),
    workdir: Path | None = None,
    progress: Progress = _quiet,
    echo: Progress | None = None,
    timeout: float = 300.0,
) -> InstalledDriver:
    """Build and import the images, install or upgrade the chart, wait until it is up on every
    node (see the module docstring). ``echo`` gets the user-facing commands (the demo)."""
    values = install_values(sets or {}, fake_gpus=fake_gpus)
    nodes = tuple(n.name for n in cluster.state.nodes)
    with tempfile.TemporaryDirectory(prefix="dra-e2e-images-", dir=workdir) as tmp:
        for kind in IMAGES:
            if echo is not None:
                echo(f"$ python images/build_image.py {kind}")
            else:
                progress(f"[dra-e2e] building the {kind} image (images/build_image.py {kind})")
            archive = build_project_image(
                kind, Path(tmp) / f"{kind}.tar", capture=echo is None, progress=progress
            )
            refs = cluster.import_image(archive)
            progress(f"[dra-e2e] {kind} image imported into {', '.join(nodes)}: {', '.join(refs)}")
    output = chart.install(cluster.kubeconfig, values, values_files=values_files, echo=echo)
    progress(f"[dra-e2e] chart {chart.RELEASE} installed in namespace {chart.NAMESPACE}")
    installed = InstalledDriver(
        release=chart.RELEASE,
        namespace=chart.NAMESPACE,
        nodes=nodes,
        values=values,
        helm_output=output,
    )
    wait_until_up(cluster, installed, timeout=timeout)
    progress(f"[dra-e2e] kubelet plugin Ready and ResourceSlices published on {', '.join(nodes)}")
    return installed


def _json(cluster: Cluster, *args: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(cluster.kubectl(*args, "-o", "json", timeout=30))
    except (KubectlError, subprocess.TimeoutExpired, json.JSONDecodeError):
        return []
    return list(data.get("items", []))


def wait_until_up(cluster: Cluster, installed: InstalledDriver, *, timeout: float) -> None:
    """Until the plugin pod of every node is Ready and, for the GPU plugin, every node has
    published slices; else :class:`InstallDriverError` naming the nodes still missing."""
    deadline = time.monotonic() + timeout
    while True:
        pods = _json(cluster, "get", "pods", "-n", installed.namespace, "-l", PLUGIN_SELECTOR)
        missing_pods = nodes_without_ready_plugin(pods, installed.nodes)
        missing_slices: list[str] = []
        if publishes_gpus(installed.values):
            missing_slices = nodes_without_slices(
                _json(cluster, "get", "resourceslices"), installed.nodes
            )
        if not missing_pods and not missing_slices:
            return
        if time.monotonic() > deadline:
            if missing_pods:
                states = plugin_states(pods)
                detail = "; ".join(f"{n}: {states.get(n, 'no pod')}" for n in missing_pods)
                raise InstallDriverError(
                    "a Running and Ready kubelet plugin pod",
                    missing_pods,
                    f"after {timeout:.0f}s ({detail})",
                )
            raise InstallDriverError(
                f"{DRIVER} ResourceSlices with devices", missing_slices, f"after {timeout:.0f}s"
            )
        time.sleep(2)
