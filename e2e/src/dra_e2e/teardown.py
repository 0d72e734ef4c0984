"""Tear a cluster down: stop exactly what it started and remove its host state.

Order matters: controllers stop first (nothing recreates pods), the kubelets get
a chance to stop pods cleanly (CNI DEL, DRA unprepare), then the runtime goes
and whatever is left is swept: containerd's shims by their socket path (inside
the state directory), containers by this cluster's cgroup subtree. Finally the
control plane stops and the bridge, DNAT chain, mounts, slot and state go. The nodes' mount
namespaces (pod volumes, container root filesystems) vanish with their last process once their
files are unmounted.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from dra_e2e import hostcleanup, hostnet, node_mounts
from dra_e2e.cluster_view import ClusterView
from dra_e2e.errors import KubectlError
from dra_e2e.process import ProcessRecord, is_running, kill_pids, stop

Progress = Callable[[str], None]
DRAIN_TIMEOUT_S = 30.0


def teardown(cluster: ClusterView, *, progress: Progress) -> list[str]:
    """Stop and remove everything of ``cluster``; return what could not be removed."""
    state = cluster.state
    records = {r.name: r for r in cluster.processes()}
    for name in ("kube-controller-manager", "kube-scheduler"):
        if name in records:
            stop(records[name])
    _drain_pods(cluster, records, progress)
    for node in state.nodes:
        if (rec := records.get(f"kubelet-{node.name}")) is not None:
            stop(rec)
    sandboxes: dict[int, list[str]] = {}
    for node in state.nodes:
        sandboxes[node.index] = cluster.container_ids(node)
        if (rec := records.get(f"containerd-{node.name}")) is not None:
            stop(rec)
    # Shims re-parent to init and keep containers alive; both are this cluster's
    # alone: shims name our socket path, containers sit in our cgroup subtree.
    kill_pids(cluster.own_pids())
    for node in state.nodes:
        hostcleanup.kill_cgroup_tree(node.cgroup_root)
    for rec in reversed(list(records.values())):
        stop(rec)
    kill_pids(cluster.own_pids())
    # Whatever still runs in a node's mount namespace (a CNI plugin, a process that left the
    # cgroup) is the node's alone, as long as the namespace file still holds that namespace.
    namespaces = {
        node.name: node.mount_ns_inode
        for node in state.nodes
        if node.mount_ns and node_mounts.bound_inode(Path(node.mount_ns)) == node.mount_ns_inode
    }
    for inode in namespaces.values():
        kill_pids(node_mounts.pids_inside(inode))
    leftovers: list[str] = []
    for name, inode in namespaces.items():
        leftovers += [
            f"process {pid} in the mount namespace of {name}"
            for pid in node_mounts.pids_inside(inode)
        ]
    for node in state.nodes:
        leftovers += [f"cgroup {p}" for p in hostcleanup.remove_cgroup_tree(node.cgroup_root)]
    net = hostnet.cluster_net(state.slot)
    hostnet.remove_service_dnat(net)
    # Node 0's bridge exists from the start of ``up`` (the API server binds it).
    for index in {0} | {node.index for node in state.nodes}:
        hostnet.delete_bridge(net.node(index))
        hostcleanup.remove_cni_results(
            network=net.node(index).bridge, container_ids=sandboxes.get(index, [])
        )
    hostcleanup.remove_container_log_links(cluster.state_dir)
    leftovers += [f"mount {m}" for m in hostcleanup.unmount_all_under(cluster.state_dir)]
    leftovers += [f"process {p}" for p in cluster.own_pids()]
    if not leftovers:
        shutil.rmtree(cluster.state_dir, ignore_errors=True)
    hostnet.release_slot(state.slot, cluster.state_dir)
    progress(
        "[dra-e2e] cluster down"
        + (f"; leftovers: {', '.join(leftovers)}" if leftovers else ", nothing left behind")
    )
    return leftovers


def _drain_pods(
    cluster: ClusterView, records: dict[str, ProcessRecord], progress: Progress
) -> None:
    """Let the kubelets stop pods (CNI DEL, DRA unprepare) before the sweep."""
    api = records.get("kube-apiserver")
    if api is None or not is_running(api) or not cluster.state.nodes:
        return
    try:
        cluster.kubectl(
            "delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--wait=false",
            timeout=30,
        )  # fmt: skip
    except (KubectlError, subprocess.TimeoutExpired) as exc:
        progress(f"[dra-e2e] could not delete pods before teardown: {exc}")
        return
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            left = cluster.kubectl("get", "pods", "-A", "-o", "name", timeout=15).split()
        except (KubectlError, subprocess.TimeoutExpired):
            return
        if not left:
            return
        time.sleep(1)
    progress(f"[dra-e2e] pods still terminating after {DRAIN_TIMEOUT_S:.0f}s; sweeping them")
