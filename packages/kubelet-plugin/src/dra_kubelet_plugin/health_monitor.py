"""Feeds device-layer health events into the :class:`~dra_kubelet_plugin.health.HealthHub`.

XIDs that report application faults (a kernel's illegal access, a preempted context) say
nothing about the GPU and are ignored, as NVIDIA's driver does by default; a double-bit ECC
error counts as XID 48. A lost GPU taints all of its devices with ``gpu.nvidia.com/gpu-lost``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence

from dra_nvlib import DeviceLib, HealthEvent, HealthEventKind, HealthWatch, NvlibError

from dra_kubelet_plugin.health import TAINT_GPU_LOST, TAINT_XID, HealthHub
from dra_kubelet_plugin.inventory import NodeDevice

__all__ = ["APPLICATION_XIDS", "HealthMonitor", "taint_for"]

log = logging.getLogger(__name__)

#: XIDs caused by applications, not by the GPU (NVIDIA's default ignore list).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
_DBE_XID = 48


def taint_for(event: HealthEvent) -> tuple[str, str | None, str] | None:
    """``(taint key, value, message)`` for an event, or ``None`` when it is harmless."""
    if event.kind is HealthEventKind.GPU_LOST:
        return TAINT_GPU_LOST, None, f"GPU {event.gpu_uuid} fell off the bus"
    if event.kind is HealthEventKind.ECC_DOUBLE_BIT:
        return TAINT_XID, str(_DBE_XID), f"double-bit ECC error on GPU {event.gpu_uuid}"
    if event.kind is HealthEventKind.XID and event.xid is not None:
        if event.xid in APPLICATION_XIDS:
            return None
        detail = f": {event.description}" if event.description else ""
        return TAINT_XID, str(event.xid), f"XID {event.xid} on GPU {event.gpu_uuid}{detail}"
    return None


class HealthMonitor:
    """Watches the device layer in a thread and marks devices unhealthy in the hub."""

    def __init__(self, lib: DeviceLib, hub: HealthHub, devices: Sequence[NodeDevice]) -> None:
        """Watch the GPUs behind ``devices``."""
        self._lib = lib
        self._hub = hub
        self._by_gpu: dict[str, list[NodeDevice]] = {}
        self.set_devices(devices)
        self._stop = threading.Event()
        self._watch: HealthWatch | None = None

    async def open(self) -> bool:
        """Subscribe to the device layer's events (before serving, so none is missed);
        a backend that cannot watch is logged, not fatal. Returns whether it watches."""
        try:
            self._watch = await asyncio.to_thread(self._lib.watch_health, list(self._by_gpu))
        except NvlibError as exc:
            log.error(
                "cannot watch GPU health; devices stay reported healthy",
                extra={"event": "health_watch_unavailable", "error": str(exc)},
            )
            return False
        return True

    async def run(self) -> None:
        """Handle events until cancelled or stopped (opens the watch if needed)."""
        if self._watch is None and not await self.open():
            return
        watch = self._watch
        assert watch is not None
        loop = asyncio.get_running_loop()
        try:
            while not self._stop.is_set():
                event = await asyncio.to_thread(watch.wait, 0.5)
                if event is not None:
                    await self.handle(event)
        finally:
            await loop.run_in_executor(None, watch.close)

    def set_devices(self, devices: Sequence[NodeDevice]) -> None:
        """Map events to this device list from now on (the inventory changed)."""
        by_gpu: dict[str, list[NodeDevice]] = {}
        for d in devices:
            by_gpu.setdefault(d.gpu.uuid, []).append(d)
        self._by_gpu = by_gpu

    def stop(self) -> None:
        """Ask :meth:`run` to return."""
        self._stop.set()

    async def handle(self, event: HealthEvent) -> None:
        """Apply one event to the hub."""
        mapped = taint_for(event)
        if mapped is None:
            log.info(
                "ignored health event",
                extra={"event": "health_event_ignored", "kind": event.kind.value, "xid": event.xid},
            )
            return
        key, value, message = mapped
        targets = self._by_gpu.get(event.gpu_uuid, [])
        if event.mig_uuid and key == TAINT_XID:
            only = [d for d in targets if d.mig is not None and d.mig.uuid == event.mig_uuid]
            targets = only or targets
        for device in targets:
            await self._hub.mark_unhealthy(
                device.name, message=message, taint_key=key, taint_value=value
            )
