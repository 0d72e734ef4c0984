"""Host-managed IMEX (chart ``resources.computeDomains.imex.mode=hostManaged``), NVIDIA's mode
for clusters whose nodes run ``nvidia-imex`` as a host service.

The driver then runs no domain daemons: the controller makes no daemon DaemonSet or daemon
template, the plugin publishes only ``channel-0`` and, at each channel prepare, asks the
host's daemon for its readiness over its Unix command socket (``nvidia-imex-ctl -q
--u=<socket>`` run chrooted into the driver root, where the host's tools and socket are),
failing the claim retryably until it answers ``READY``. Every domain of the node shares the
host's IMEX domain and gets channel 0 (isolation ``domain``; ``channel`` is not supported, as
in NVIDIA's driver). Both modes need nothing else; the gate ``HostManagedIMEXDaemon`` only
unlocks ``hostManaged``.

:func:`check_imex_mode` is pure; :class:`HostImex` runs the query (I/O), and
:class:`FakeHostImex` asks the fake daemon of fake GPU nodes instead (the device backend
picks one).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from dra_kubelet_core.errors import ConfigurationError

from .imex_process import ImexCommands, query_ready

__all__ = [
    "DRIVER_MANAGED",
    "HOST_MANAGED",
    "IMEX_GATE",
    "FakeHostImex",
    "HostImex",
    "check_imex_mode",
]

DRIVER_MANAGED: Final = "driverManaged"
HOST_MANAGED: Final = "hostManaged"
#: The feature gate that unlocks ``hostManaged`` (NVIDIA's, alpha, off by default).
IMEX_GATE: Final = "HostManagedIMEXDaemon"
# An empty isolation means "domain", as in NVIDIA's imex.Config.Validate.
_ISOLATIONS: Final = ("", "domain")


def check_imex_mode(mode: str, isolation: str, gates: Mapping[str, bool]) -> bool:
    """Validate NVIDIA's IMEX settings; True for host-managed IMEX.

    Raises:
        ConfigurationError: an unknown mode or isolation, ``channel`` isolation (not built,
            as in NVIDIA's driver), or ``hostManaged`` without its feature gate.
    """
    if mode not in (DRIVER_MANAGED, HOST_MANAGED):
        raise ConfigurationError("--imex-mode", f"{mode!r}: {DRIVER_MANAGED} or {HOST_MANAGED}")
    if isolation not in _ISOLATIONS:
        what = "is not supported" if isolation == "channel" else "is unknown"
        raise ConfigurationError("--imex-isolation", f"{isolation!r} {what} (only 'domain')")
    if mode == HOST_MANAGED and not gates.get(IMEX_GATE, False):
        raise ConfigurationError(
            "--imex-mode", f"{HOST_MANAGED} needs the feature gate {IMEX_GATE}=true"
        )
    return mode == HOST_MANAGED


@dataclass(frozen=True)
class HostImex:
    """The host's IMEX daemon, as one node's plugin sees it."""

    #: the command socket, a path below the driver root (chart ``imex.hostSocketPath``)
    socket_path: str
    #: where this process sees the host's driver root (its ``nvidia-imex-ctl``)
    driver_root: Path = Path("/")

    def query(self) -> tuple[str, ...]:
        """The readiness command: ``nvidia-imex-ctl -q --u=<socket>`` in the driver root."""
        ctl = ("nvidia-imex-ctl", "-q", f"--u={self.socket_path}")
        return ctl if self.driver_root == Path("/") else ("chroot", str(self.driver_root), *ctl)

    def ready(self, *, timeout_s: float = 10.0) -> bool:
        """Whether the host's daemon answers ``READY`` (unreachable: False)."""
        return query_ready(ImexCommands((), self.query()), timeout_s=timeout_s)


@dataclass(frozen=True)
class FakeHostImex(HostImex):
    """The host's IMEX daemon on fake GPU nodes: asked through :mod:`.fake_imex`, at the
    socket's path below the driver root (no chroot)."""

    def query(self) -> tuple[str, ...]:
        """The fake ``nvidia-imex-ctl -q`` against the socket below the driver root."""
        socket = self.driver_root / self.socket_path.lstrip("/")
        fake = (sys.executable, "-m", "dra_computedomain.fake_imex")
        return (*fake, "ctl", "-q", f"--u={socket}")
