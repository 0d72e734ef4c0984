"""Remove what a cluster left in the host kernel: pod cgroups and mounts.

Each kubelet gets its own ``cgroupRoot`` named after its node, so every container
process of the cluster sits in a cgroup subtree only this cluster uses; the
sweep kills what is left there and removes the subtree. Mounts on the host (the
nodes' mount namespace files, and whatever an older harness mounted) all lie under
the state directory and are detached before it is deleted; pod volumes, container
root filesystems and network namespaces live in the nodes' own mount namespaces
(:mod:`dra_e2e.node_mounts`), which vanish with them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")


def cgroup_hierarchies() -> list[Path]:
    """Mounted cgroup hierarchies (v1 controllers and the unified one), deduplicated."""
    roots: dict[str, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, _, after = line.partition(" - ")
        fstype = after.split()[0] if after else ""
        if fstype in ("cgroup", "cgroup2"):
            mount_point = Path(before.split()[4])
            roots.setdefault(os.path.realpath(mount_point), mount_point)
    return list(roots.values())


def _cgroup_dirs(name: str) -> list[Path]:
    dirs = []
    for hierarchy in cgroup_hierarchies():
        top = hierarchy / name.strip("/")
        if top.is_dir():
            dirs.append(top)
    return dirs


def _procs(directory: Path) -> list[int]:
    pids: list[int] = []
    for sub, _dirs, _files in os.walk(directory):
        try:
            text = (Path(sub) / "cgroup.procs").read_text()
        except OSError:
            continue
        pids.extend(int(p) for p in text.split())
    return pids


def kill_cgroup_tree(name: str, *, timeout: float = 10.0) -> int:
    """SIGKILL every process under cgroup ``name`` in all hierarchies; return the count."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = {p for d in _cgroup_dirs(name) for p in _procs(d)}
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        seen |= pids
        time.sleep(0.2)
    return len(seen)


def remove_cgroup_tree(name: str) -> list[Path]:
    """rmdir the cgroup subtree ``name`` bottom-up in all hierarchies; return leftovers."""
    left = []
    for top in _cgroup_dirs(name):
        for sub, _dirs, _files in sorted(os.walk(top), key=lambda w: -len(w[0])):
            try:
                os.rmdir(sub)
            except OSError:
                left.append(Path(sub))
    return left


def mounts_under(directory: Path) -> list[Path]:
    """Mount points at or below ``directory``, deepest first."""
    prefix = str(directory.resolve())
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4].replace("\\040", " ")
        if mount_point == prefix or mount_point.startswith(prefix + "/"):
            found.append(Path(mount_point))
    return sorted(set(found), key=lambda p: -len(p.parts))


def unmount_all_under(directory: Path) -> list[Path]:
    """Lazily unmount everything below ``directory``; return mounts that stayed."""
    for _ in range(3):
        mounts = mounts_under(directory)
        if not mounts:
            return []
        for mount_point in mounts:
            subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, check=False)
    return mounts_under(directory)


CNI_RESULTS_DIR = Path("/var/lib/cni/results")


def remove_cni_results(*, network: str, container_ids: Iterable[str] = ()) -> int:
    """Delete libcni's cached results of ``network`` and of the given sandboxes.

    They are left behind when pods were swept rather than torn down by the
    runtime; containerd's loopback network ("cni-loopback") is shared by name, so
    its entries are matched by sandbox id. Returns how many files were removed.
    """
    patterns = [f"{network}-*", *(f"*-{cid}-*" for cid in container_ids)]
    removed = 0
    for pattern in patterns:
        for path in CNI_RESULTS_DIR.glob(pattern):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


CONTAINER_LOG_LINKS = Path("/var/log/containers")


def remove_container_log_links(state_dir: Path) -> int:
    """Remove the kubelet's /var/log/containers symlinks that point into ``state_dir``.

    That directory is hard-coded in the kubelet; its links are normally removed
    with the containers, but not for containers that were swept.
    """
    prefix = str(state_dir.resolve()) + "/"
    removed = 0
    for link in CONTAINER_LOG_LINKS.glob("*.log"):
        try:
            target = os.readlink(link)
        except OSError:
            continue
        if target.startswith(prefix):
            link.unlink(missing_ok=True)
            removed += 1
    return removed
