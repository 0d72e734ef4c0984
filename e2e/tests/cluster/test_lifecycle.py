"""A second, private cluster: two nodes, then ``down`` leaves nothing behind."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest
from dra_e2e import hostnet
from dra_e2e.cluster import Cluster
from dra_e2e.handle import ClusterHandle
from dra_e2e.process import is_running

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_up_add_node_down_leaves_nothing(e2e_cluster: ClusterHandle) -> None:
    if e2e_cluster.local is None:
        pytest.skip("lifecycle of the local harness; KUBECONFIG points at an external cluster")
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="dra-e2e-lifecycle-")))
    cluster.up()
    try:
        cluster.add_node()
        handle = ClusterHandle(
            kubeconfig=cluster.kubeconfig, kubectl_path=cluster.bins.kubectl, local=cluster
        )
        assert sorted(handle.node_names()) == ["e2e-node-0", "e2e-node-1"]
        assert all(cluster.node_ready(n) for n in handle.node_names())
        records = cluster.processes()
        names = {r.name for r in records}
        assert {"etcd", "kube-apiserver", "kubelet-e2e-node-1", "containerd-e2e-node-1"} <= names
        net = cluster.net
        bridges = [net.node(n.index).bridge for n in cluster.state.nodes]
        cgroups = [n.cgroup_root for n in cluster.state.nodes]
    except BaseException:
        cluster.down()
        raise
    leftovers = cluster.down()
    assert leftovers == []
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
    assert not (hostnet.SLOT_DIR / f"slot-{net.slot}").exists()
