"""The persisted description of a cluster (``cluster.json``).

It holds what ``down`` and ``status`` need to find every process, node, port
and address again from a later, separate process.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dra_e2e import configs, node_mounts
from dra_e2e.versions import KUBERNETES_VERSION

STATE_FILE = "cluster.json"


@dataclass
class NodeState:
    """One kubelet node: its network, ports, cgroup root, state layout and mount namespace."""

    name: str
    index: int
    root: str
    kubelet_port: int
    healthz_port: int
    cgroup_root: str
    #: The file the node's mount namespace is bound to ("" until it exists).
    mount_ns: str = ""
    #: That namespace's inode (``mnt:[N]`` in /proc/PID/ns/mnt), to find what runs inside.
    mount_ns_inode: int = 0

    @property
    def paths(self) -> configs.NodePaths:
        """Filesystem layout under the cluster state directory."""
        return configs.NodePaths(Path(self.root))

    @property
    def mounts(self) -> node_mounts.NodeMounts:
        """The node's mount namespace: its file and the binds inside."""
        return node_mounts.plan(self.name, self.paths, ns_dir=Path(self.mount_ns).parent)


@dataclass
class ClusterState:
    """Everything ``down``/``status`` need, persisted as ``cluster.json``."""

    state_dir: str
    slot: int
    kubernetes_version: str = KUBERNETES_VERSION
    apiserver_port: int = 0
    etcd_port: int = 0
    etcd_peer_port: int = 0
    controller_manager_port: int = 0
    scheduler_port: int = 0
    feature_gates: dict[str, bool] = field(default_factory=dict)
    nodes: list[NodeState] = field(default_factory=list)
    processes: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain data for ``cluster.json``."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterState:
        """Inverse of ``to_json``."""
        nodes = [NodeState(**n) for n in data.get("nodes", [])]
        fields = {k: v for k, v in data.items() if k != "nodes"}
        return cls(nodes=nodes, **fields)
