"""Each node's mount namespace plan: the standard paths, backed by the node's own directories."""

from __future__ import annotations

from pathlib import Path

from dra_e2e import node_mounts
from dra_e2e.configs import CDI_DIR, KUBELET_ROOT, NodePaths
from dra_e2e.state import ClusterState, NodeState


def _mounts(tmp_path: Path, node: str = "e2e-node-1") -> node_mounts.NodeMounts:
    return node_mounts.plan(node, NodePaths(tmp_path / "nodes" / node), ns_dir=tmp_path / "mntns")


def test_the_kubelet_root_and_cdi_dir_are_the_standard_paths_inside_every_node(
    tmp_path: Path,
) -> None:
    binds = {b.target: b.source for b in _mounts(tmp_path).binds}
    assert binds == {
        Path("/var/lib/kubelet"): tmp_path / "nodes" / "e2e-node-1" / "kubelet",
        Path("/var/run/cdi"): tmp_path / "nodes" / "e2e-node-1" / "cdi",
    }
    # The chart's defaults: one install serves every node.
    assert (Path("/var/lib/kubelet"), Path("/var/run/cdi")) == (KUBELET_ROOT, CDI_DIR)


def test_two_nodes_share_the_paths_but_not_the_directories(tmp_path: Path) -> None:
    zero, one = _mounts(tmp_path, "e2e-node-0"), _mounts(tmp_path, "e2e-node-1")
    assert [b.target for b in zero.binds] == [b.target for b in one.binds]
    assert not {b.source for b in zero.binds} & {b.source for b in one.binds}
    assert zero.ns_file != one.ns_file
    assert zero.ns_dir == one.ns_dir == tmp_path / "mntns"


def test_daemons_enter_the_namespace_file_and_keep_their_command_line(tmp_path: Path) -> None:
    mounts = _mounts(tmp_path)
    argv = mounts.enter(["/cache/kubelet", "--root-dir=/var/lib/kubelet"])
    assert argv == [
        "nsenter",
        f"--mount={tmp_path / 'mntns' / 'e2e-node-1'}",
        "--",
        "/cache/kubelet",
        "--root-dir=/var/lib/kubelet",
    ]


def test_the_namespace_is_private_and_bound_to_its_file(tmp_path: Path) -> None:
    mounts = _mounts(tmp_path)
    create = mounts.create_argv()
    assert create[0] == "unshare"
    assert f"--mount={mounts.ns_file}" in create
    assert create[create.index("--propagation") + 1] == "private"
    binds = mounts.bind_argvs()
    assert [argv[3:] for argv in binds] == [
        ["mount", "--bind", str(b.source), str(b.target)] for b in mounts.binds
    ]
    assert all(argv[:3] == mounts.enter([]) for argv in binds)
    dir_argvs = node_mounts.private_dir_argvs(mounts.ns_dir)
    assert dir_argvs == [
        ["mount", "--bind", str(mounts.ns_dir), str(mounts.ns_dir)],
        ["mount", "--make-private", str(mounts.ns_dir)],
    ]


def test_node_paths_map_to_where_the_host_sees_them(tmp_path: Path) -> None:
    mounts = _mounts(tmp_path)
    node = tmp_path / "nodes" / "e2e-node-1"
    assert mounts.on_host("/var/lib/kubelet/plugins/gpu.nvidia.com") == (
        node / "kubelet" / "plugins" / "gpu.nvidia.com"
    )
    assert mounts.on_host(Path("/var/run/cdi")) == node / "cdi"
    assert mounts.on_host("/var/lib/kubeletx") == Path("/var/lib/kubeletx")
    assert mounts.on_host("/etc/hosts") == Path("/etc/hosts")


def test_node_state_round_trips_its_namespace_and_reads_old_state(tmp_path: Path) -> None:
    node = NodeState(
        name="e2e-node-0",
        index=0,
        root=str(tmp_path / "nodes" / "e2e-node-0"),
        kubelet_port=1,
        healthz_port=2,
        cgroup_root="/drae2e0n0",
        mount_ns=str(tmp_path / "mntns" / "e2e-node-0"),
        mount_ns_inode=4026532178,
    )
    state = ClusterState(state_dir=str(tmp_path), slot=0, nodes=[node])
    again = ClusterState.from_json(state.to_json())
    assert again.nodes == [node]
    assert again.nodes[0].mounts == node_mounts.plan(
        "e2e-node-0", node.paths, ns_dir=tmp_path / "mntns"
    )
    old = state.to_json()
    for entry in old["nodes"]:
        del entry["mount_ns"], entry["mount_ns_inode"]
    assert ClusterState.from_json(old).nodes[0].mount_ns_inode == 0


def test_a_file_that_holds_no_namespace_has_no_inode(tmp_path: Path) -> None:
    plain = tmp_path / "e2e-node-0"
    plain.touch()
    assert node_mounts.bound_inode(plain) == 0
    assert node_mounts.bound_inode(tmp_path / "missing") == 0
    assert node_mounts.pids_inside(0) == []
