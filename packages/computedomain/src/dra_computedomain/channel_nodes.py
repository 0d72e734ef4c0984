"""The IMEX channel device nodes on real nodes: created when missing, as NVIDIA's plugin does.

A channel claim's container gets ``/dev/nvidia-caps-imex-channels/channelN``. The NVIDIA
driver does not create these nodes itself; NVIDIA's compute-domain plugin makes each missing
one with ``mknod`` (character device, major of ``nvidia-caps-imex-channels`` in
``/proc/devices``, minor ``N``, mode 0666) before injecting it. Without that major (the driver
is too old or not loaded with IMEX channels) the prepare fails, naming the node.

:func:`channel_minors` and :func:`missing_channels` decide without I/O; :class:`ChannelNodes`
is the edge that reads ``/proc/devices`` and has the host's device nodes
(:class:`~dra_kubelet_core.host_devices.HostDevices`) call ``mknod``. On fake nodes the
channels are stand-ins that always exist, so nothing is made.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

from dra_kubelet_core.device_nodes import NodeUnavailableError, char_majors
from dra_kubelet_core.host_devices import HostDevices

from .errors import ChannelDeviceError
from .names import MAX_CHANNELS

__all__ = [
    "CHANNEL_DIR",
    "IMEX_CHANNELS_MODULE",
    "ChannelNodes",
    "channel_minors",
    "channel_path",
    "missing_channels",
]

CHANNEL_DIR: Final = "/dev/nvidia-caps-imex-channels"
#: the character-device name of the channels in ``/proc/devices``
IMEX_CHANNELS_MODULE: Final = "nvidia-caps-imex-channels"

log = logging.getLogger(__name__)


def channel_minors(mode: str) -> range:
    """The channels a claim of allocation ``mode`` gets: channel 0, or all with ``All``."""
    return range(MAX_CHANNELS if mode == "All" else 1)


def channel_path(minor: int) -> str:
    """The container (and host) path of channel ``minor``."""
    return f"{CHANNEL_DIR}/channel{minor}"


def missing_channels(minors: Iterable[int], exists: Callable[[str], bool]) -> tuple[int, ...]:
    """The channels of ``minors`` whose node ``exists`` says is not there yet."""
    return tuple(n for n in minors if not exists(channel_path(n)))


class ChannelNodes:
    """Creates missing channel nodes among ``host``'s device nodes."""

    def __init__(
        self,
        host: HostDevices,
        proc_root: Path = Path("/proc"),
        *,
        proc_devices: Path | None = None,
    ) -> None:
        """``host``: the host's device nodes (the backend's); ``proc_root`` holds ``devices``.

        ``proc_devices``: a file read in place of ``<proc_root>/devices`` (NVIDIA's
        ``ALT_PROC_DEVICES_PATH``, chart value ``altProcDevices``: a mock NVML node whose
        kernel lists no NVIDIA devices).
        """
        self.host = host
        self._proc_devices = proc_devices or proc_root / "devices"

    def ensure(self, claim: str, mode: str) -> int:
        """Make sure every channel node of a ``mode`` claim exists; return how many were made.

        Raises:
            ChannelDeviceError: a node is missing and cannot be created (no
                ``nvidia-caps-imex-channels`` major, or ``mknod`` refused); names the node.
        """
        missing = missing_channels(channel_minors(mode), self.host.exists)
        if not missing:
            return 0
        first = channel_path(missing[0])
        # One read decides for all of them: without the major none can be made.
        try:
            majors = char_majors(self._proc_devices.read_text())
        except OSError as exc:
            raise ChannelDeviceError(
                claim, first, f"cannot read {self._proc_devices}: {exc}"
            ) from exc
        if IMEX_CHANNELS_MODULE not in majors:
            raise ChannelDeviceError(
                claim,
                first,
                f"{self._proc_devices} lists no {IMEX_CHANNELS_MODULE!r} character device "
                "(does the NVIDIA driver support IMEX channels?)",
            )
        made = 0
        for minor in missing:
            path = channel_path(minor)
            try:
                made += self.host.ensure_char_node(
                    path,
                    module=IMEX_CHANNELS_MODULE,
                    minor=minor,
                    proc_devices=self._proc_devices,
                )
            except NodeUnavailableError as exc:
                raise ChannelDeviceError(claim, path, exc.reason) from exc
        log.info(
            "imex channel nodes created",
            extra={"event": "channel_nodes_created", "claim": claim, "count": made},
        )
        return made
