"""How this host backs the device nodes a container gets: the host's own, or stand-ins.

The device backend decides it once at start (:mod:`dra_kubelet_plugin.backend`,
:mod:`dra_computedomain.backend`) and the parts that name device nodes in CDI edits get one
:class:`HostDevices`:

- :class:`HostDeviceNodes` (real GPUs): each node is the host's own at the same path, looked
  for below ``dev_root`` (where this process sees the host's ``/dev``) and, where a caller
  asks, created with ``mknod`` like NVIDIA's tools (:func:`~.device_nodes.ensure_char_node`);
- :class:`StandInDeviceNodes` (fake GPUs): no such node exists on the host, so every one is
  backed by ``/dev/null``, which tools that look for the node can open; nothing is created.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Protocol

from dra_kubelet_core.cdi import DeviceNode
from dra_kubelet_core.device_nodes import ensure_char_node

__all__ = ["STAND_IN_NODE", "HostDeviceNodes", "HostDevices", "StandInDeviceNodes"]

#: The host file behind every stand-in device node.
STAND_IN_NODE: Final = "/dev/null"


class HostDevices(Protocol):
    """The device nodes of this host, as CDI edits name them."""

    def node(self, path: str, *, permissions: str | None = None) -> DeviceNode:
        """The CDI device node that gives a container ``path``."""
        ...

    def exists(self, path: str) -> bool:
        """Whether the host has what backs the container's ``path``."""
        ...

    def ensure_char_node(self, path: str, *, module: str, minor: int, proc_devices: Path) -> bool:
        """Make sure the character device ``path`` of ``module`` exists; return whether it
        had to be created.

        Raises:
            NodeUnavailableError: it is missing and cannot be created.
        """
        ...


class HostDeviceNodes:
    """The host's own device nodes (real GPUs), seen below ``dev_root``."""

    def __init__(self, dev_root: Path = Path("/")) -> None:
        """``dev_root``: where this process sees the host's ``/dev`` (``/`` on a node)."""
        self.dev_root = dev_root

    def node(self, path: str, *, permissions: str | None = None) -> DeviceNode:
        """The host's node at the same path (no ``hostPath``)."""
        return DeviceNode(path=path, permissions=permissions)

    def exists(self, path: str) -> bool:
        """Whether the node is there below ``dev_root``."""
        return (self.dev_root / path.lstrip("/")).exists()

    def ensure_char_node(self, path: str, *, module: str, minor: int, proc_devices: Path) -> bool:
        """``mknod`` the node below ``dev_root`` when missing (major from ``proc_devices``).

        Raises:
            NodeUnavailableError: ``module`` has no major there, or ``mknod`` failed.
        """
        return ensure_char_node(
            self.dev_root, path, module=module, minor=minor, proc_devices=proc_devices
        )


class StandInDeviceNodes:
    """Stand-ins for the nodes of fake GPUs: every one backed by ``/dev/null``."""

    def node(self, path: str, *, permissions: str | None = None) -> DeviceNode:
        """``path`` in the container, ``/dev/null`` on the host."""
        return DeviceNode(path=path, host_path=STAND_IN_NODE, permissions=permissions)

    def exists(self, path: str) -> bool:  # noqa: ARG002 -- every stand-in has its backing
        """Always: ``/dev/null`` backs every stand-in."""
        return True

    def ensure_char_node(
        self,
        path: str,  # noqa: ARG002 -- nothing to make
        *,
        module: str,  # noqa: ARG002
        minor: int,  # noqa: ARG002
        proc_devices: Path,  # noqa: ARG002
    ) -> bool:
        """Nothing to create: the stand-in's backing always exists."""
        return False
