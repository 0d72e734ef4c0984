"""Feeds device-layer health events into the :class:`~dra_kubelet_core.health.HealthHub`.

XIDs that report application faults (a kernel's illegal access, a preempted context) say
nothing about the GPU and are ignored, as NVIDIA's driver does by default (its list plus
``--additional-xids-to-ignore``); a double-bit ECC error counts as XID 48. An event that names
a MIG device (by UUID or by GPU/compute instance ids) taints only that MIG device; a lost GPU
taints all of its devices with ``gpu.nvidia.com/gpu-lost``.

The monitor never stops silently: an error while waiting for events is logged (one line) and
the event set is re-created with bounded exponential backoff; while it cannot be created the
devices carry the ``gpu.nvidia.com/unmonitored`` taint, cleared once watching works again.
With ``xid_recovery_s`` set, an XID/ECC taint is cleared (the device reported healthy again)
after that long without a further event on the device.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence

from dra_kube_client import Backoff
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.health import HealthHub
from dra_nvlib import DeviceLib, HealthEvent, HealthEventKind, HealthWatch, NvlibError

from dra_kubelet_plugin.device_taints import TAINT_GPU_LOST, TAINT_UNMONITORED, TAINT_XID
from dra_kubelet_plugin.inventory import NodeDevice

__all__ = [
    "DEFAULT_IGNORED_XIDS",
    "XIDS_TO_IGNORE_FLAG",
    "HealthMonitor",
    "backoff_delay",
    "parse_xid_list",
    "taint_for",
]

log = logging.getLogger(__name__)

#: XIDs caused by applications, not by the GPU (NVIDIA's default ignore list).
DEFAULT_IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})
#: NVIDIA's flag adding XIDs to :data:`DEFAULT_IGNORED_XIDS`.
XIDS_TO_IGNORE_FLAG = "--additional-xids-to-ignore"
_DBE_XID = 48


def parse_xid_list(text: str, *, setting: str = XIDS_TO_IGNORE_FLAG) -> frozenset[int]:
    """``"13, 94,95"`` -> ``{13, 94, 95}``; empty text -> no XIDs.

    Raises :class:`ConfigurationError` naming ``setting`` for an entry that is not a
    non-negative integer.
    """
    xids: set[int] = set()
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if not item.isdigit():
            raise ConfigurationError(setting, f"{item!r} is not an XID (a non-negative integer)")
        xids.add(int(item))
    return frozenset(xids)


def backoff_delay(attempt: int, *, base_s: float = 1.0, cap_s: float = 30.0) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2, ...): doubling from ``base_s``, at most
    ``cap_s``."""
    return Backoff(initial_s=base_s, max_s=cap_s, jitter=0.0).delay(attempt)


def taint_for(
    event: HealthEvent, ignored_xids: Collection[int] = DEFAULT_IGNORED_XIDS
) -> tuple[str, str | None, str] | None:
    """``(taint key, value, message)`` for an event, or ``None`` when it is harmless."""
    if event.kind is HealthEventKind.GPU_LOST:
        return TAINT_GPU_LOST, None, f"GPU {event.gpu_uuid} fell off the bus"
    if event.kind is HealthEventKind.ECC_DOUBLE_BIT:
        return TAINT_XID, str(_DBE_XID), f"double-bit ECC error on GPU {event.gpu_uuid}"
    if event.kind is HealthEventKind.XID and event.xid is not None:
        if event.xid in ignored_xids:
            return None
        detail = f": {event.description}" if event.description else ""
        return TAINT_XID, str(event.xid), f"XID {event.xid} on GPU {event.gpu_uuid}{detail}"
    return None


def _names_mig(event: HealthEvent, device: NodeDevice) -> bool:
    mig = device.mig
    if mig is None:
        return False
    if event.mig_uuid:
        return mig.uuid == event.mig_uuid
    return mig.gi_id == event.gi_id and (event.ci_id is None or mig.ci_id == event.ci_id)


class HealthMonitor:
    """Watches the device layer in a thread and keeps the hub's health state current."""

    def __init__(
        self,
        lib: DeviceLib,
        hub: HealthHub,
        devices: Sequence[NodeDevice],
        *,
        additional_ignored_xids: Collection[int] = (),
        xid_recovery_s: float | None = None,
        backoff_base_s: float = 1.0,
        backoff_cap_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Watch the GPUs behind ``devices``; ignore NVIDIA's default XIDs plus
        ``additional_ignored_xids``; see the module docs for ``xid_recovery_s``."""
        self._lib = lib
        self._hub = hub
        self._by_gpu: dict[str, list[NodeDevice]] = {}
        self.set_devices(devices)
        self._ignored = DEFAULT_IGNORED_XIDS | frozenset(additional_ignored_xids)
        self._recovery_s = xid_recovery_s
        self._backoff_base_s = backoff_base_s
        self._backoff_cap_s = backoff_cap_s
        self._clock = clock
        self._last_event: dict[str, float] = {}
        self._unmonitored = False
        self._stop = threading.Event()
        self._watch: HealthWatch | None = None

    @property
    def ignored_xids(self) -> frozenset[int]:
        """Every XID this monitor ignores."""
        return self._ignored

    def _devices(self) -> list[NodeDevice]:
        return [d for group in self._by_gpu.values() for d in group]

    async def open(self) -> bool:
        """Subscribe to the device layer's events (before serving, so none is missed).

        A failure is logged and marks the devices unmonitored, never fatal; :meth:`run`
        retries. Returns whether it watches.
        """
        try:
            self._watch = await asyncio.to_thread(self._lib.watch_health, list(self._by_gpu))
        except NvlibError as exc:
            log.error(
                "cannot watch GPU health; devices marked unmonitored",
                extra={
                    "event": "health_watch_unavailable",
                    "error": str(exc),
                    "error_type": type(exc).__name__,
                },
            )
            await self._mark_unmonitored(str(exc))
            return False
        if self._unmonitored:
            log.info("GPU health watch re-established", extra={"event": "health_watch_restored"})
            await self._clear_unmonitored()
        return True

    async def run(self) -> None:
        """Handle events until cancelled or stopped, re-creating the watch after errors."""
        attempt = 0
        try:
            while not self._stop.is_set():
                if self._watch is None and not await self.open():
                    attempt += 1
                    await self._pause(self._delay(attempt))
                    continue
                watch = self._watch
                assert watch is not None
                try:
                    event = await asyncio.to_thread(watch.wait, 0.5)
                except Exception as exc:  # any failure: log, re-create, never end silently
                    attempt += 1
                    delay = self._delay(attempt)
                    log.error(
                        "waiting for GPU health events failed; re-creating the event set",
                        extra={
                            "event": "health_watch_error",
                            "error": str(exc),
                            "error_type": type(exc).__name__,
                            "attempt": attempt,
                            "retry_in_s": delay,
                        },
                    )
                    await self._close_watch()
                    await self._pause(delay)
                    continue
                attempt = 0
                if event is not None:
                    await self.handle(event)
                await self.recover()
        finally:
            await self._close_watch()

    def _delay(self, attempt: int) -> float:
        return backoff_delay(attempt, base_s=self._backoff_base_s, cap_s=self._backoff_cap_s)

    async def _close_watch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            try:
                await asyncio.to_thread(watch.close)
            except Exception as exc:  # closing a broken event set may fail too: not fatal
                log.warning(
                    "closing the GPU health watch failed",
                    extra={"event": "health_watch_close_failed", "error": str(exc)},
                )

    async def _pause(self, seconds: float) -> None:
        deadline = self._clock() + seconds
        while not self._stop.is_set():
            remaining = deadline - self._clock()
            if remaining <= 0:
                return
            await asyncio.sleep(min(remaining, 0.1))

    async def _mark_unmonitored(self, reason: str) -> None:
        self._unmonitored = True
        for device in self._devices():
            current = self._hub.get(device.name)
            if current is not None and not current.healthy:
                continue  # keep the more specific taint (XID, lost GPU)
            await self._hub.mark_unhealthy(
                device.name,
                message=f"GPU health is not monitored: {reason}",
                taint_key=TAINT_UNMONITORED,
                unknown=True,
            )

    async def _clear_unmonitored(self) -> None:
        self._unmonitored = False
        for device in self._devices():
            current = self._hub.get(device.name)
            if current is not None and current.taint_key == TAINT_UNMONITORED:
                await self._hub.mark_healthy(device.name)

    async def recover(self) -> None:
        """Report devices healthy again whose XID/ECC taint is older than the recovery
        period (no-op without ``xid_recovery_s``)."""
        if self._recovery_s is None:
            return
        now = self._clock()
        for name, at in list(self._last_event.items()):
            if now - at < self._recovery_s:
                continue
            del self._last_event[name]
            current = self._hub.get(name)
            if current is None or current.taint_key != TAINT_XID:
                continue
            log.info(
                "device recovered: no health event within the recovery period",
                extra={"event": "device_recovered", "device": name, "after_s": self._recovery_s},
            )
            await self._hub.mark_healthy(name)

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
        mapped = taint_for(event, self._ignored)
        if mapped is None:
            log.info(
                "ignored health event",
                extra={"event": "health_event_ignored", "kind": event.kind.value, "xid": event.xid},
            )
            return
        key, value, message = mapped
        targets = self._by_gpu.get(event.gpu_uuid, [])
        if key == TAINT_XID and (event.mig_uuid or event.gi_id is not None):
            # An event on one MIG device says nothing about its siblings; when no published
            # device matches, the whole GPU is the safe side.
            only = [d for d in targets if _names_mig(event, d)]
            targets = only or targets
        now = self._clock()
        for device in targets:
            current = self._hub.get(device.name)
            if key == TAINT_XID and current is not None and current.taint_key == TAINT_GPU_LOST:
                continue  # a lost GPU stays lost; a later XID must not replace (or recover) it
            if key == TAINT_XID:
                self._last_event[device.name] = now
            await self._hub.mark_unhealthy(
                device.name, message=message, taint_key=key, taint_value=value
            )
