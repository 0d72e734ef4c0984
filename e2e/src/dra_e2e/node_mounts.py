"""Each node's private mount namespace: the standard kubelet and CDI paths, per node.

On a real cluster every node has its own ``/var/lib/kubelet`` and ``/var/run/cdi``; here all
nodes share one host. So each node's containerd and kubelet, and with them every shim, runc and
container they start, run in a mount namespace of their own, in which the node's directories
under the state directory are bind-mounted onto those standard paths. A pod's hostPath
``/var/lib/kubelet/plugins`` then resolves per node, exactly as on separate machines, and one
chart install with the chart's default paths serves every node.

The namespace is made persistent the way ``ip netns`` does it for network namespaces: bound to
a file (``<state>/mntns/<node>``, on a private bind mount, as ``unshare --mount=FILE`` requires),
which ``nsenter --mount=FILE`` enters. A restarted kubelet (same command line) lands in the same
namespace. Its propagation is private: nothing mounted inside reaches the host, and ``down``
frees it by stopping its processes and unmounting the file, after which the kernel drops every
mount inside (pod volumes, container root filesystems, network namespaces).

The plan (which binds, which command lines, where the host sees a node path) is pure; ``create``
and ``pids_inside`` do the I/O.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dra_e2e.configs import CDI_DIR, KUBELET_ROOT, NodePaths
from dra_e2e.errors import ComponentError


@dataclass(frozen=True)
class BindMount:
    """``source`` (the node's own directory on the host) appears at ``target`` in the node."""

    source: Path
    target: Path


@dataclass(frozen=True)
class NodeMounts:
    """The mount namespace of one node: its file and what is bound inside."""

    node: str
    ns_file: Path
    binds: tuple[BindMount, ...]

    @property
    def ns_dir(self) -> Path:
        """The directory of the namespace files (a private bind mount of itself)."""
        return self.ns_file.parent

    def enter(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside the node's namespace (``nsenter`` execs it: same pid)."""
        return ["nsenter", f"--mount={self.ns_file}", "--", *argv]

    def create_argv(self) -> list[str]:
        """Creates the namespace, private, bound to ``ns_file``."""
        return ["unshare", f"--mount={self.ns_file}", "--propagation", "private", "true"]

    def bind_argvs(self) -> list[list[str]]:
        """One ``mount --bind`` per bind, run inside the namespace."""
        return [self.enter(["mount", "--bind", str(b.source), str(b.target)]) for b in self.binds]

    def on_host(self, node_path: Path | str) -> Path:
        """Where this host sees the node's ``node_path`` (a path below a bind target is
        below its source; any other path is the host's own)."""
        path = Path(node_path)
        for bind in sorted(self.binds, key=lambda b: -len(b.target.parts)):
            if path == bind.target or bind.target in path.parents:
                return bind.source / path.relative_to(bind.target)
        return path


def plan(node: str, paths: NodePaths, *, ns_dir: Path) -> NodeMounts:
    """The namespace of node ``node``: its kubelet root and CDI directory at the standard paths."""
    return NodeMounts(
        node=node,
        ns_file=ns_dir / node,
        binds=(
            BindMount(source=paths.kubelet_root, target=KUBELET_ROOT),
            BindMount(source=paths.cdi_dir, target=CDI_DIR),
        ),
    )


def private_dir_argvs(ns_dir: Path) -> list[list[str]]:
    """Make ``ns_dir`` a private bind mount of itself (namespace files may not be bound on a
    shared mount: the bind would propagate into the namespace itself)."""
    return [
        ["mount", "--bind", str(ns_dir), str(ns_dir)],
        ["mount", "--make-private", str(ns_dir)],
    ]


def _run(argv: Sequence[str], *, node: str) -> None:
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0:
        raise ComponentError(
            f"mount namespace of {node}",
            f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}",
        )


def create(mounts: NodeMounts) -> int:
    """Create the node's namespace with its binds; return the namespace's inode.

    The bind targets are created on the host first (empty directories, as on a fresh node):
    a mount needs an existing mount point, and inside the namespace it is the same filesystem.
    """
    mounts.ns_dir.mkdir(parents=True, exist_ok=True)
    if not os.path.ismount(mounts.ns_dir):
        for argv in private_dir_argvs(mounts.ns_dir):
            _run(argv, node=mounts.node)
    mounts.ns_file.touch()
    for bind in mounts.binds:
        bind.source.mkdir(parents=True, exist_ok=True)
        bind.target.mkdir(parents=True, exist_ok=True)
    _run(mounts.create_argv(), node=mounts.node)
    for argv in mounts.bind_argvs():
        _run(argv, node=mounts.node)
    return os.stat(mounts.ns_file).st_ino


def bound_inode(ns_file: Path) -> int:
    """The inode of the mount namespace bound to ``ns_file``; 0 when none is (any more).

    Namespace inodes are reused once a namespace is gone, so a recorded inode names this
    node's namespace only while its file still holds it.
    """
    try:
        st, nsfs = os.stat(ns_file), os.stat("/proc/self/ns/mnt")
    except OSError:
        return 0
    return st.st_ino if st.st_dev == nsfs.st_dev else 0


def pids_inside(inode: int) -> list[int]:
    """Pids of the processes in the mount namespace with ``inode`` (0: none)."""
    if not inode:
        return []
    wanted = f"mnt:[{inode}]"
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if os.readlink(entry / "ns" / "mnt") == wanted:
                found.append(int(entry.name))
        except OSError:
            continue
    return found
