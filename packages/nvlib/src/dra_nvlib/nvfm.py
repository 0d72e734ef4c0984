"""The real Fabric Manager's edge: where NVIDIA's driver connects through ``libnvfm``.

NVIDIA's GPU plugin, with ``FabricManagerPartitioning`` on a node with an NVSwitch fabric,
loads ``libnvidia-fabricmanager.so`` (the ``libnvfm`` C SDK, through go-nvfm) from the driver
root and connects over TCP when ``NVIDIA_FABRICMANAGER_ADDRESS`` is set (empty: 127.0.0.1),
else over the unix socket ``NVIDIA_FABRICMANAGER_UNIX_SOCKET`` (default
``/driver-root/run/nvidia-fabricmanager/socket``). No Python binding of ``libnvfm`` is built
here: :func:`open_nvfm` resolves the same connection and then raises
:class:`~dra_nvlib.errors.FabricManagerUnavailableError`, so a real node with the gate on
refuses to start with that reason, as NVIDIA's refuses when Fabric Manager cannot be opened.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dra_nvlib.errors import FabricManagerUnavailableError
from dra_nvlib.fabric_partitions import FabricManager

__all__ = ["FmConnection", "fm_connection", "open_nvfm"]

_ADDRESS_ENV = "NVIDIA_FABRICMANAGER_ADDRESS"
_SOCKET_ENV = "NVIDIA_FABRICMANAGER_UNIX_SOCKET"
_DEFAULT_ADDRESS = "127.0.0.1"
_DEFAULT_SOCKET = "/driver-root/run/nvidia-fabricmanager/socket"


@dataclass(frozen=True)
class FmConnection:
    """Where Fabric Manager listens: a TCP host or a unix socket path."""

    address: str
    unix_socket: bool


def fm_connection(environ: Mapping[str, str]) -> FmConnection:
    """The connection NVIDIA's driver would use, from its environment variables (pure)."""
    if _ADDRESS_ENV in environ:
        return FmConnection(environ[_ADDRESS_ENV] or _DEFAULT_ADDRESS, unix_socket=False)
    return FmConnection(environ.get(_SOCKET_ENV) or _DEFAULT_SOCKET, unix_socket=True)


def open_nvfm(connection: FmConnection) -> FabricManager:
    """Connect to the node's Fabric Manager through ``libnvfm``.

    Raises:
        FabricManagerUnavailableError: always, naming ``libnvfm``: no binding is built.
    """
    where = ("unix socket " if connection.unix_socket else "TCP ") + connection.address
    raise FabricManagerUnavailableError(
        f"cannot reach Fabric Manager at {where}: this driver has no binding to libnvfm "
        "(libnvidia-fabricmanager.so, NVIDIA's go-nvfm); FabricManagerPartitioning needs "
        "the fake device backend here"
    )
