"""The host's VFIO nodes as a passthrough plugin sees them, through two narrow views.

The chart mounts the host's ``/dev/vfio`` alone (not the host's ``/dev`` or root) and gives its
place as ``--vfio-dir``; ``/dev/iommu`` (iommufd's API node) needs no mount, because the kernel
shows its misc device in sysfs (``class/misc/iommu``, which the plugin reads for passthrough
anyway) and devtmpfs makes the node. The container's ``/dev`` cannot serve instead: the
runtime fills it once at start, and group nodes appear when a GPU is bound to ``vfio-pci``.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Final

from dra_kubelet_core.cdi import DeviceNode
from dra_kubelet_core.device_nodes import NodeUnavailableError
from dra_nvlib import iommufd_available

__all__ = ["IOMMU_NODE", "VFIO_DIR", "VfioHostNodes"]

#: The host directory of the VFIO group and iommufd device nodes.
VFIO_DIR: Final = PurePosixPath("/dev/vfio")
#: iommufd's API node.
IOMMU_NODE: Final = "/dev/iommu"


class VfioHostNodes:
    """The host's own VFIO nodes (:class:`~dra_kubelet_core.host_devices.HostDevices` of real
    passthrough GPUs): each at the same path in the container, looked for below ``vfio_dir``
    (``/dev/iommu``: in ``sysfs_root``)."""

    def __init__(self, *, vfio_dir: Path, sysfs_root: Path) -> None:
        """``vfio_dir``: where this process sees the host's ``/dev/vfio``; ``sysfs_root``: its
        ``/sys``."""
        self.vfio_dir = vfio_dir
        self.sysfs_root = sysfs_root

    def node(self, path: str, *, permissions: str | None = None) -> DeviceNode:
        """The host's node at the same path (no ``hostPath``)."""
        return DeviceNode(path=path, permissions=permissions)

    def exists(self, path: str) -> bool:
        """Whether the host has the VFIO node ``path``.

        Raises:
            ValueError: ``path`` is neither below ``/dev/vfio`` nor ``/dev/iommu`` (this view
                shows nothing else of the host).
        """
        if path == IOMMU_NODE:
            return iommufd_available(self.sysfs_root)
        node = PurePosixPath(path)
        if not node.is_relative_to(VFIO_DIR) or ".." in node.parts:
            raise ValueError(f"{path} is no VFIO node (below {VFIO_DIR}) nor {IOMMU_NODE}")
        return (self.vfio_dir / node.relative_to(VFIO_DIR)).exists()

    def ensure_char_node(self, path: str, *, module: str, minor: int, proc_devices: Path) -> bool:
        """VFIO nodes are the kernel's (devtmpfs makes them when ``vfio-pci`` binds a GPU):
        never created here.

        Raises:
            NodeUnavailableError: always, naming ``path``.
        """
        del module, minor, proc_devices
        raise NodeUnavailableError(path, "VFIO nodes are made by the kernel, not by the plugin")
