"""Socket paths of the plugin, and binding them safely."""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from dra_kubelet_plugin.errors import ConfigurationError

__all__ = ["MAX_SOCKET_PATH", "SocketPaths", "check_socket_path", "remove_stale_socket"]


@dataclass(frozen=True)
class SocketPaths:
    """Where the registration and DRA sockets live.

    Classic names: ``<registrar>/<driver>-reg.sock`` and ``<plugins>/<driver>/dra.sock``.
    Rolling-update mode (a pod UID is given) puts the UID in both names, so the sockets of an
    old and a new plugin pod can coexist while the kubelet moves over.
    """

    registration: Path
    dra: Path
    plugin_dir: Path

    @classmethod
    def build(
        cls, *, driver_name: str, registrar_dir: Path, plugins_dir: Path, pod_uid: str | None
    ) -> SocketPaths:
        """Compute the paths for ``driver_name`` (with ``pod_uid`` for rolling updates)."""
        plugin_dir = plugins_dir / driver_name
        if pod_uid:
            return cls(
                registration=registrar_dir / f"{driver_name}-{pod_uid}-reg.sock",
                dra=plugin_dir / f"dra-{pod_uid}.sock",
                plugin_dir=plugin_dir,
            )
        return cls(
            registration=registrar_dir / f"{driver_name}-reg.sock",
            dra=plugin_dir / "dra.sock",
            plugin_dir=plugin_dir,
        )


#: sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


def check_socket_path(path: Path) -> None:
    """Raise ``ConfigurationError`` when ``path`` is too long to bind as a unix socket."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ConfigurationError(
            "socket path",
            f"{path} is {len(os.fsencode(path))} bytes; unix sockets allow {MAX_SOCKET_PATH}",
        )


def remove_stale_socket(path: Path) -> None:
    """Remove our own leftover socket before binding; refuse to delete anything else.

    Raises:
        ConfigurationError: the path is too long for a unix socket.
        FileExistsError: something other than a socket is in the way.
    """
    check_socket_path(path)
    with contextlib.suppress(FileNotFoundError):
        mode = os.lstat(path).st_mode
        if not stat.S_ISSOCK(mode):
            raise FileExistsError(f"{path} exists and is not a socket; refusing to remove it")
        path.unlink()
