"""Socket paths of the plugin, and binding and dialing them whatever their length.

A unix socket address holds at most 107 path bytes (``sockaddr_un.sun_path`` is 108 bytes with
the terminating NUL). The kubelet dials the registration socket and the DRA endpoint by their
absolute paths, and Go's ``net`` package enforces the same limit, so those paths must fit:
:func:`check_kubelet_dialable` refuses them at start with an error naming the path and the limit.
The plugin's own binds and probes go through :func:`short_socket_path`, which reaches a long
path through a short symlinked directory, so they never depend on the path's length.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc.aio

from dra_kubelet_core.errors import ConfigurationError

__all__ = [
    "MAX_GRPC_BIND_PATH",
    "MAX_SOCKET_PATH",
    "POD_TOKEN_LENGTH",
    "SocketIdentity",
    "SocketPaths",
    "bind_unix",
    "check_kubelet_dialable",
    "check_socket_path",
    "pod_token",
    "remove_own_socket",
    "remove_stale_socket",
    "short_socket_path",
    "socket_identity",
]

#: sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107
#: gRPC's own unix-socket resolver refuses to bind paths of 106 and 107 bytes (measured with
#: grpcio: its address parsing keeps room of its own), so the plugin's binds stay at 105.
MAX_GRPC_BIND_PATH = 105
#: Characters of the pod UID in per-pod socket names: the UID's first group (32 random bits),
#: enough to tell two plugin pods that overlap on one node apart while keeping names short.
POD_TOKEN_LENGTH = 8
_TOKEN_CHARS = re.compile(r"^[A-Za-z0-9._-]+$")


def pod_token(pod_uid: str) -> str:
    """The short, recognizable part of a pod UID used in per-pod socket names.

    Raises:
        ConfigurationError: the UID contains characters that do not belong in a file name.
    """
    token = pod_uid[:POD_TOKEN_LENGTH].rstrip("-")
    if not token or not _TOKEN_CHARS.match(token):
        raise ConfigurationError("--pod-uid", f"{pod_uid!r} is not a pod UID")
    return token


@dataclass(frozen=True)
class SocketPaths:
    """Where the registration and DRA sockets live.

    Classic names: ``<registrar>/<driver>-reg.sock`` and ``<plugins>/<driver>/dra.sock``.
    Rolling-update mode (a pod UID is given) puts the UID's first group in both names, so the
    sockets of an old and a new plugin pod can coexist while the kubelet moves over, without
    pushing long kubelet roots past the socket path limit; ``per_instance`` says which.
    """

    registration: Path
    dra: Path
    plugin_dir: Path
    per_instance: bool = False

    @classmethod
    def build(
        cls, *, driver_name: str, registrar_dir: Path, plugins_dir: Path, pod_uid: str | None
    ) -> SocketPaths:
        """Compute the paths for ``driver_name`` (with ``pod_uid`` for rolling updates)."""
        plugin_dir = plugins_dir / driver_name
        if pod_uid:
            token = pod_token(pod_uid)
            return cls(
                registration=registrar_dir / f"{driver_name}-{token}-reg.sock",
                dra=plugin_dir / f"dra-{token}.sock",
                plugin_dir=plugin_dir,
                per_instance=True,
            )
        return cls(
            registration=registrar_dir / f"{driver_name}-reg.sock",
            dra=plugin_dir / "dra.sock",
            plugin_dir=plugin_dir,
        )


def _fits(path: Path, limit: int = MAX_SOCKET_PATH) -> bool:
    return len(os.fsencode(path)) <= limit


def check_socket_path(path: Path, *, setting: str = "socket path") -> None:
    """Raise ``ConfigurationError`` when ``path`` is too long for a unix socket address."""
    if not _fits(path):
        raise ConfigurationError(
            setting,
            f"{path} is {len(os.fsencode(path))} bytes; unix socket paths allow "
            f"{MAX_SOCKET_PATH} (sockaddr_un.sun_path)",
        )


def check_kubelet_dialable(path: Path, *, setting: str) -> None:
    """Refuse a socket path the kubelet could not dial (it is longer than the limit).

    ``setting`` names the flag whose directory the path is in, so the error says what to
    shorten.
    """
    if not _fits(path):
        raise ConfigurationError(
            setting,
            f"the kubelet dials {path} itself, which is {len(os.fsencode(path))} bytes; unix "
            f"socket paths allow {MAX_SOCKET_PATH} bytes (sockaddr_un.sun_path, also in Go's "
            "net package): use a shorter directory",
        )


@contextlib.contextmanager
def short_socket_path(path: Path) -> Iterator[Path]:
    """A path of at most 105 bytes (:data:`MAX_GRPC_BIND_PATH`) naming the same socket file as
    ``path``, while in use.

    A path that fits is returned as it is. Otherwise a fresh temporary directory holds a
    one-letter symlink to ``path``'s directory; the kernel follows it on bind and connect, so
    the socket file itself is created at (or reached through) ``path``. The alias is removed
    on exit; the socket file is not.

    Raises:
        ConfigurationError: even the alias is too long (the socket's own name is too long).
    """
    if _fits(path, MAX_GRPC_BIND_PATH):
        yield path
        return
    alias_dir = Path(tempfile.mkdtemp(prefix="dra-sock-"))
    try:
        link = alias_dir / "d"
        link.symlink_to(path.parent.absolute(), target_is_directory=True)
        short = link / path.name
        check_socket_path(short, setting=f"socket name {path.name}")
        yield short
    finally:
        shutil.rmtree(alias_dir, ignore_errors=True)


def bind_unix(server: grpc.aio.Server, path: Path) -> None:
    """Bind ``server`` to the unix socket ``path`` whatever its length.

    gRPC binds when the port is added, so the short alias is only needed for the call.
    """
    with short_socket_path(path) as short:
        server.add_insecure_port(f"unix://{short}")


def remove_stale_socket(path: Path) -> None:
    """Remove our own leftover socket before binding; refuse to delete anything else.

    Raises:
        FileExistsError: something other than a socket is in the way.
    """
    with contextlib.suppress(FileNotFoundError):
        mode = os.lstat(path).st_mode
        if not stat.S_ISSOCK(mode):
            raise FileExistsError(f"{path} exists and is not a socket; refusing to remove it")
        path.unlink()


#: What tells one socket file from another that later took its path: device and inode.
SocketIdentity = tuple[int, int]


def socket_identity(path: Path) -> SocketIdentity | None:
    """The identity of the socket file at ``path`` right after we bound it (``None``: gone)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def remove_own_socket(path: Path, identity: SocketIdentity | None) -> bool:
    """Remove the socket at ``path`` if it is still the file we bound (``identity``).

    An instance that took the path over since (the classic names have no per-instance part)
    keeps its socket: removing it would deregister that instance from the kubelet. Returns
    whether a file was removed.
    """
    if identity is None or socket_identity(path) != identity:
        return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        return True
    return False
