"""Restarting a recorded daemon (the kubelet-crash scenarios) without a cluster.

``Cluster.respawn`` is what ``restart_kubelet`` and ``e2e-cluster restart-kubelet`` use: the
old process is gone, the new one runs the same command line, appends to the same log, and
replaces the old record in ``cluster.json`` so that ``down`` stops the new one.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from dra_e2e.cluster import Cluster
from dra_e2e.errors import ClusterStateError
from dra_e2e.handle import ClusterHandle
from dra_e2e.process import ProcessRecord, is_running, spawn, stop, tail
from dra_e2e.state import STATE_FILE, ClusterState, NodeState


def _fake_cluster(tmp_path: Path) -> tuple[Cluster, ProcessRecord]:
    """A state directory recording one node whose "kubelet" is a shell loop."""
    log = tmp_path / "logs" / "kubelet-n0.log"
    record = spawn(
        "kubelet-n0",
        ["/bin/sh", "-c", "echo kubelet up; exec sleep 300"],
        log=log,
    )
    other = spawn("etcd", ["sleep", "300"], log=tmp_path / "logs" / "etcd.log")
    state = ClusterState(
        state_dir=str(tmp_path),
        slot=0,
        nodes=[
            NodeState(
                name="n0",
                index=0,
                root=str(tmp_path / "nodes" / "n0"),
                kubelet_port=1,
                healthz_port=2,
                cgroup_root="/x",
            )
        ],
        processes=[other.to_json(), record.to_json()],
    )
    (tmp_path / STATE_FILE).write_text(json.dumps(state.to_json()))
    return Cluster(tmp_path), record


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_respawn_replaces_the_process_and_its_record(tmp_path: Path, sig: signal.Signals) -> None:
    cluster, old = _fake_cluster(tmp_path)
    etcd = cluster.processes()[0]
    try:
        new = cluster.respawn("kubelet-n0", sig=sig)
        assert not is_running(old)
        assert is_running(new)
        assert new.pid != old.pid
        assert (new.name, new.argv, new.log) == (old.name, old.argv, old.log)
        reloaded = Cluster(tmp_path).processes()
        assert reloaded == [etcd, new], "same order, the old record replaced"
        assert is_running(etcd), "nothing else is touched"
        starts = [line for line in tail(new.log).splitlines() if " starting: /bin/sh" in line]
        assert len(starts) == 2, "the new process appends to the same log"
    finally:
        for record in Cluster(tmp_path).processes():
            stop(record, timeout=5)


def test_restarting_an_unknown_node_or_process_is_a_clear_error(tmp_path: Path) -> None:
    cluster, _ = _fake_cluster(tmp_path)
    try:
        with pytest.raises(ClusterStateError, match="no node named 'nope'"):
            cluster.restart_kubelet("nope")
        with pytest.raises(ClusterStateError, match="no process named 'kubelet-nope'"):
            cluster.respawn("kubelet-nope")
        with pytest.raises(ClusterStateError, match="no process named 'kube-apiserver'"):
            cluster.restart_apiserver()
    finally:
        for record in cluster.processes():
            stop(record, timeout=5)


def test_restarting_the_apiserver_of_a_cluster_not_run_here_is_a_clear_error(
    tmp_path: Path,
) -> None:
    handle = ClusterHandle(kubeconfig=tmp_path / "kubeconfig", kubectl_path=Path("kubectl"))
    with pytest.raises(ClusterStateError, match="restart_apiserver needs the local e2e cluster"):
        handle.restart_apiserver()


def test_cli_restart_kubelet_needs_a_cluster_and_a_node(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "dra_e2e", "--state-dir", str(tmp_path / "none"), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    missing = cli("restart-kubelet", "--node", "e2e-node-0")
    assert missing.returncode == 1
    assert missing.stderr.startswith("e2e-cluster: ")
    assert str(tmp_path / "none") in missing.stderr
    no_node = cli("restart-kubelet")
    assert no_node.returncode == 2
    assert "--node" in no_node.stderr
