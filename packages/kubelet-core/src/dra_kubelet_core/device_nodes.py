"""The NVIDIA device nodes a container needs: found, created like NVIDIA's tools, or an error.

``/dev/nvidia-uvm`` and ``/dev/nvidia-uvm-tools`` appear only when something first loads the
``nvidia-uvm`` module's devices (NVIDIA #1380: a spec written before that silently lacks
them, and CUDA fails in the container). The MIG access nodes below ``/dev/nvidia-caps`` are
likewise made on demand. As ``nvidia-modprobe`` and the toolkit's ``nvdevices`` do, a missing
node is created with ``mknod`` from the character-device major that ``/proc/devices`` lists
for its module (minor 0 for ``nvidia-uvm``, 1 for ``-tools``; a cap's minor from
``/proc/driver/nvidia-caps/mig-minors``), mode 0666. When the module is not loaded there is
no major, and the caller fails the prepare naming the node.

:func:`char_majors` and :func:`mig_cap_minors` are pure parsers; :func:`ensure_char_node`
is the I/O edge.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = [
    "NodeUnavailableError",
    "char_majors",
    "ensure_char_node",
    "mig_cap_minors",
]


class NodeUnavailableError(RuntimeError):
    """A device node is missing and cannot be created; ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"device node {path} is missing and cannot be created: {reason}")
        self.path = path
        self.reason = reason


def char_majors(proc_devices: str) -> dict[str, int]:
    """``{module name: major}`` of the "Character devices:" block of ``/proc/devices``."""
    majors: dict[str, int] = {}
    in_char = False
    for line in proc_devices.splitlines():
        text = line.strip()
        if text.endswith(":"):
            in_char = text == "Character devices:"
            continue
        parts = text.split()
        if in_char and len(parts) == 2 and parts[0].isdigit():
            majors.setdefault(parts[1], int(parts[0]))
    return majors


def mig_cap_minors(mig_minors: str) -> dict[str, int]:
    """``{"gpu0/gi1/access": minor, ...}`` from ``/proc/driver/nvidia-caps/mig-minors``."""
    minors: dict[str, int] = {}
    for line in mig_minors.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            minors[parts[0]] = int(parts[1])
    return minors


def ensure_char_node(
    dev_root: Path, path: str, *, module: str, minor: int, proc_devices: Path
) -> bool:
    """Make sure the character device ``path`` (e.g. ``/dev/nvidia-uvm``) exists below
    ``dev_root``; return whether it had to be created.

    Raises:
        NodeUnavailableError: it is missing and ``module`` has no major in ``proc_devices``
            (module not loaded), or ``mknod`` failed.
    """
    node = dev_root / path.lstrip("/")
    if node.exists():
        return False
    try:
        majors = char_majors(proc_devices.read_text())
    except OSError as exc:
        raise NodeUnavailableError(path, f"cannot read {proc_devices}: {exc}") from exc
    major = majors.get(module)
    if major is None:
        raise NodeUnavailableError(
            path, f"{proc_devices} lists no {module!r} character device (is {module} loaded?)"
        )
    try:
        node.parent.mkdir(parents=True, exist_ok=True)
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
        # mknod applies the umask; the driver's own nodes are world read-writable.
        node.chmod(0o666)
    except FileExistsError:
        return False
    except OSError as exc:
        raise NodeUnavailableError(path, f"mknod {major}:{minor} failed: {exc}") from exc
    return True
