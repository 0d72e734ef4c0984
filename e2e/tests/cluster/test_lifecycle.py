"""``e2e-cluster`` end to end on a private cluster: up, two nodes, kubelet restart, status, logs,
down.

``down`` must leave nothing behind: no process, bridge, DNAT chain, cgroup,
mount, node mount namespace, slot or state directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from dra_e2e import hostnet, node_mounts
from dra_e2e.cluster import Cluster
from dra_e2e.handle import ClusterHandle
from dra_e2e.process import ProcessRecord, is_running

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _cli(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dra_e2e", "--state-dir", str(state_dir), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_up_add_node_status_logs_down_leaves_nothing(e2e_cluster: ClusterHandle) -> None:
    if e2e_cluster.local is None:
        pytest.skip("lifecycle of the local harness; KUBECONFIG points at an external cluster")
    state_dir = Path(tempfile.mkdtemp(prefix="dra-e2e-lifecycle-"))
    up = _cli(state_dir, "up")
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = _cli(state_dir, "kubeconfig").stdout.strip()
        assert up.stdout.strip().splitlines()[-1] == kubeconfig
        handle = ClusterHandle(kubeconfig=Path(kubeconfig), kubectl_path=e2e_cluster.kubectl_path)
        assert handle.node_names() == ["e2e-node-0"]
        added = _cli(state_dir, "add-node")
        assert added.returncode == 0, added.stderr
        assert added.stdout.strip() == "e2e-node-1"
        old_kubelet = _kubelet(state_dir, "e2e-node-1")
        restarted = _cli(state_dir, "restart-kubelet", "--node", "e2e-node-1")
        assert restarted.returncode == 0, restarted.stderr
        new_kubelet = _kubelet(state_dir, "e2e-node-1")
        assert restarted.stdout.strip() == str(new_kubelet.pid)
        assert not is_running(old_kubelet)
        assert is_running(new_kubelet)
        status = _cli(state_dir, "status")
        assert status.returncode == 0, status.stdout + status.stderr
        info = json.loads(status.stdout)
        assert info["apiserver_ready"] is True
        assert {name: n["ready"] for name, n in info["nodes"].items()} == {
            "e2e-node-0": True,
            "e2e-node-1": True,
        }
        assert all(p["running"] for p in info["processes"].values())
        listed = _cli(state_dir, "list").stdout
        assert any(
            line.split("\t")[1:] == [str(state_dir), "8/8 processes"]
            for line in listed.splitlines()
        ), listed
        logs = _cli(state_dir, "logs", "kube-apiserver", "--lines", "3")
        assert logs.stdout.startswith("===== kube-apiserver: ")
        cluster = Cluster(state_dir)
        records = cluster.processes()
        net = cluster.net
        bridges = [net.node(n.index).bridge for n in cluster.state.nodes]
        cgroups = [n.cgroup_root for n in cluster.state.nodes]
        namespaces = [n.mount_ns_inode for n in cluster.state.nodes]
        assert all(node_mounts.pids_inside(inode) for inode in namespaces)
    finally:
        down = _cli(state_dir, "down")
    assert down.returncode == 0, down.stderr
    assert "nothing left behind" in down.stderr
    _assert_nothing_left(cluster, records, net, bridges, cgroups)
    # Nothing runs in the nodes' mount namespaces any more: the kernel has dropped them.
    assert [node_mounts.pids_inside(inode) for inode in namespaces] == [[], []]


def _kubelet(state_dir: Path, node: str) -> ProcessRecord:
    (record,) = [p for p in Cluster(state_dir).processes() if p.name == f"kubelet-{node}"]
    return record


def _assert_nothing_left(
    cluster: Cluster,
    records: list[ProcessRecord],
    net: hostnet.ClusterNet,
    bridges: list[str],
    cgroups: list[str],
) -> None:
    assert {"etcd", "kube-apiserver", "kubelet-e2e-node-1", "containerd-e2e-node-1"} <= {
        r.name for r in records
    }
    assert [r.name for r in records if is_running(r)] == []
    assert cluster.own_pids() == []
    assert not cluster.state_dir.exists()
    for bridge in bridges:
        assert subprocess.run(["ip", "link", "show", bridge], capture_output=True).returncode != 0
    chains = subprocess.run(
        ["iptables", "-w", "-t", "nat", "-S"], capture_output=True, text=True, check=True
    ).stdout
    assert net.chain not in chains
    for cgroup in cgroups:
        assert not (Path("/sys/fs/cgroup/memory") / cgroup.strip("/")).exists()
    assert str(cluster.state_dir) not in Path("/proc/self/mountinfo").read_text()
    assert not (hostnet.SLOT_DIR / f"slot-{net.slot}").exists()
