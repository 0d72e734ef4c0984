"""Simulated GPU nodes on a running harness cluster: kwok's controller plus its Nodes.

:func:`start_kwok` runs the cached kwok controller against the cluster's kube-apiserver
(recorded like every other daemon, so ``down`` stops it); :func:`add_kwok_nodes` creates
Nodes it manages, each with the ResourceSlices the GPU plugin would publish for its fleet
(:mod:`dra_e2e.kwok_slices`), and waits until they are Ready and schedulable;
:func:`delete_kwok_nodes` removes Nodes (their slices go with them: they are owned by the
Node, and the garbage collector deletes them; the pod GC deletes the pods bound there).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from dra_kube_client import JsonTransport, KubeApiError, KubeTransport, path_segment
from dra_kubelet_core.metrics import PluginMetrics

from dra_e2e.cluster_view import Progress, has_condition_taint, quiet
from dra_e2e.errors import ComponentError
from dra_e2e.kwok import (
    NODE_PREFIX,
    NODE_TYPE_LABEL,
    NODE_TYPE_VALUE,
    KwokOptions,
    default_stages,
    ensure_kwok,
    kwok_argv,
    kwok_node,
    node_name,
    render_kwok_config,
)
from dra_e2e.kwok_slices import (
    FLEET_LABEL,
    fleet_of,
    plugin_settings,
    publish_channel_slices,
    publish_node_slices,
)
from dra_e2e.process import ProcessRecord, is_running


class Cluster(Protocol):
    """What kwok needs of a harness cluster (:class:`dra_e2e.cluster.Cluster` has it)."""

    @property
    def state_dir(self) -> Path:
        """The cluster's state directory."""
        ...

    @property
    def kubeconfig(self) -> Path:
        """The cluster-admin kubeconfig."""
        ...

    def processes(self) -> list[ProcessRecord]:
        """Every daemon the cluster started."""
        ...

    def start_daemon(self, name: str, argv: Sequence[str]) -> ProcessRecord:
        """Start and record one more daemon."""
        ...


KWOK_PROCESS = "kwok"
#: GPUs per simulated node unless asked otherwise (the scale benchmark's 8).
DEFAULT_GPUS = 8
_INDEX = re.compile(rf"^{re.escape(NODE_PREFIX)}(\d+)$")
_SELECTOR = f"{NODE_TYPE_LABEL}={NODE_TYPE_VALUE}"
# Nodes are created and their slices published by a few threads: the API server, not this
# process, is what a scale run should load.
_WORKERS = 4


def start_kwok(
    cluster: Cluster, *, progress: Progress = quiet, options: KwokOptions | None = None
) -> ProcessRecord:
    """Build kwok if needed, write its config and start its controller (once per cluster)."""
    existing = kwok_process(cluster)
    if existing is not None and is_running(existing):
        return existing
    opts = options or KwokOptions()
    directory = ensure_kwok(progress=progress)
    config = cluster.state_dir / "kwok" / "kwok.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(render_kwok_config(default_stages(directory), opts))
    argv = kwok_argv(directory / "kwok", kubeconfig=cluster.kubeconfig, config=config, options=opts)
    record = cluster.start_daemon(KWOK_PROCESS, argv)
    progress(f"[dra-e2e] kwok controller started (pid {record.pid}, config {config})")
    return record


def kwok_process(cluster: Cluster) -> ProcessRecord | None:
    """The cluster's kwok controller record, if one was started."""
    return next((p for p in cluster.processes() if p.name == KWOK_PROCESS), None)


def next_index(names: Iterable[str]) -> int:
    """The first simulated-node index after every existing ``kwok-node-N`` name (pure)."""
    indices = [int(m.group(1)) for m in map(_INDEX.match, names) if m]
    return max(indices, default=-1) + 1


def transport_of(cluster: Cluster) -> KubeTransport:
    """A cluster-admin API transport (what the plugin's publisher writes through)."""
    return KubeTransport.from_kubeconfig(str(cluster.kubeconfig), in_cluster=False)


def list_kwok_nodes(transport: JsonTransport) -> list[dict[str, Any]]:
    """Every simulated Node, as the API server holds it."""
    data = transport.request("GET", "/api/v1/nodes", query={"labelSelector": _SELECTOR})
    return list(data.get("items") or [])


def _ready(node: dict[str, Any]) -> bool:
    if has_condition_taint(node):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def create_kwok_node(
    transport: JsonTransport, index: int, gpus: int, metrics: PluginMetrics
) -> str:
    """Create simulated node ``index`` (its fleet kind by :func:`fleet_of`) and publish its
    ``gpus`` GPUs' slices (and, on NVLink kinds, its IMEX channel's), owned by the Node;
    return its name."""
    kind = fleet_of(index)
    body = kwok_node(index, labels={FLEET_LABEL: kind.name})
    created = transport.request("POST", "/api/v1/nodes", body=body)
    name = node_name(index)
    settings = plugin_settings(name, kind.spec(gpus))
    uid = str(created["metadata"]["uid"])
    publish_node_slices(transport, settings, node_uid=uid, metrics=metrics)
    if kind.channels:
        publish_channel_slices(transport, name, node_uid=uid, metrics=metrics)
    return name


def add_kwok_nodes(
    cluster: Cluster,
    count: int,
    *,
    gpus: int = DEFAULT_GPUS,
    progress: Progress = quiet,
    timeout: float = 300.0,
) -> list[str]:
    """Create ``count`` simulated GPU nodes with their slices; wait until all are Ready."""
    record = start_kwok(cluster, progress=progress)
    transport = transport_of(cluster)
    try:
        first = next_index(n["metadata"]["name"] for n in list_kwok_nodes(transport))
        metrics = PluginMetrics()
        with ThreadPoolExecutor(_WORKERS) as pool:
            names = list(
                pool.map(
                    lambda i: create_kwok_node(transport, i, gpus, metrics),
                    range(first, first + count),
                )
            )
        progress(f"[dra-e2e] {count} kwok nodes created, their ResourceSlices published")
        _wait_ready(transport, set(names), record=record, timeout=timeout)
        progress(f"[dra-e2e] {count} kwok nodes Ready ({gpus} GPUs each)")
    finally:
        transport.close()
    return names


def _wait_ready(
    transport: JsonTransport, names: set[str], *, record: ProcessRecord, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    pending = set(names)
    while True:
        if not is_running(record):
            raise ComponentError(KWOK_PROCESS, "exited while nodes were starting")
        ready = {n["metadata"]["name"] for n in list_kwok_nodes(transport) if _ready(n)}
        pending -= ready
        if not pending:
            return
        if time.monotonic() > deadline:
            few = ", ".join(sorted(pending)[:5])
            raise ComponentError(
                KWOK_PROCESS, f"{len(pending)} nodes not Ready after {timeout:.0f}s (e.g. {few})"
            )
        time.sleep(1.0)


def delete_kwok_nodes(transport: JsonTransport, names: Sequence[str]) -> None:
    """Delete simulated Nodes (an already deleted one is fine)."""
    for name in names:
        try:
            transport.request("DELETE", f"/api/v1/nodes/{path_segment(name)}")
        except KubeApiError as exc:
            if exc.status != 404:
                raise
