"""Feeds device-layer health events into the :class:`~dra_kubelet_core.health.HealthHub`.

XIDs that report application faults (a kernel's illegal access, a preempted context) say
nothing about the GPU and are ignored, as NVIDIA's driver does by default (its list plus
``--additional-xids-to-ignore``); a double-bit ECC error counts as XID 48. An event that names
a MIG device (by UUID or by GPU/compute instance ids) taints only that MIG device; a lost GPU
taints all of its devices with ``gpu.nvidia.com/gpu-lost``.

Each GPU is watched on its own (its own event set, failures and backoff), so one bad GPU
never blinds the others, and GPUs that appear later (:meth:`HealthMonitor.set_devices`) are
watched too. The monitor never stops silently: an error while waiting is logged (one line,
naming the GPU) and that GPU's event set re-created with bounded exponential backoff; while
it cannot be created the GPU's devices carry ``gpu.nvidia.com/unmonitored``, cleared once
watching works again. A lost GPU (NVML answers GPU_IS_LOST at once on every call) keeps
``gpu-lost`` and is retried at the backoff's pace, never in a busy loop.
With ``xid_recovery_s`` set, an XID/ECC taint is cleared (the device reported healthy again)
after that long without a further event on the device.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from dra_kube_client import Backoff
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.health import HealthHub
from dra_nvlib import (
    DeviceLib,
    GpuLostError,
    HealthEvent,
    HealthEventKind,
    HealthWatch,
    NvlibError,
)

from dra_kubelet_plugin.device_taints import (
    TAINT_GPU_LOST,
    TAINT_UNMONITORED,
    TAINT_XID,
    lost_gpu_health,
    lost_message,
)
from dra_kubelet_plugin.inventory import NodeDevice

__all__ = [
    "DEFAULT_IGNORED_XIDS",
    "XIDS_TO_IGNORE_FLAG",
    "HealthMonitor",
    "mark_lost_gpus",
    "parse_xid_list",
    "taint_for",
]

log = logging.getLogger(__name__)

#: XIDs caused by applications, not by the GPU (NVIDIA's default ignore list).
DEFAULT_IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})
#: NVIDIA's flag adding XIDs to :data:`DEFAULT_IGNORED_XIDS`.
XIDS_TO_IGNORE_FLAG = "--additional-xids-to-ignore"
_DBE_XID = 48
#: Seconds one wait blocks: how long a stop or a removed GPU waits for its task to end.
_WAIT_S = 0.5
#: How often the monitor starts tasks for new GPUs and lets XID taints recover.
_SUPERVISE_S = 0.1
#: An upper bound only: threads start as GPUs need them (one waiting per GPU).
_MAX_WATCH_THREADS = 256
T = TypeVar("T")


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


def health_backoff() -> Backoff:
    """One GPU's retry delays: 1 s doubling to 30 s, jittered (the workspace's one rule)."""
    return Backoff(initial_s=1.0, max_s=30.0)


def taint_for(
    event: HealthEvent, ignored_xids: Collection[int] = DEFAULT_IGNORED_XIDS
) -> tuple[str, str | None, str] | None:
    """``(taint key, value, message)`` for an event, or ``None`` when it is harmless."""
    if event.kind is HealthEventKind.GPU_LOST:
        return TAINT_GPU_LOST, None, lost_message(event.gpu_uuid)
    if event.kind is HealthEventKind.ECC_DOUBLE_BIT:
        return TAINT_XID, str(_DBE_XID), f"double-bit ECC error on GPU {event.gpu_uuid}"
    if event.kind is HealthEventKind.XID and event.xid is not None:
        if event.xid in ignored_xids:
            return None
        detail = f": {event.description}" if event.description else ""
        return TAINT_XID, str(event.xid), f"XID {event.xid} on GPU {event.gpu_uuid}{detail}"
    return None


async def mark_lost_gpus(hub: HealthHub, devices: Iterable[NodeDevice]) -> None:
    """Taint ``gpu-lost`` on the devices of GPUs the enumeration flags lost, whether or not
    the health watch saw the loss (it may be off, or the GPU was lost before it watched)."""
    for health in lost_gpu_health(devices).values():
        await hub.mark_unhealthy(
            health.device_name, message=health.message, taint_key=TAINT_GPU_LOST
        )


def _names_mig(event: HealthEvent, device: NodeDevice) -> bool:
    mig = device.mig
    if mig is None:
        return False
    if event.mig_uuid:
        return mig.uuid == event.mig_uuid
    return mig.gi_id == event.gi_id and (event.ci_id is None or mig.ci_id == event.ci_id)


class HealthMonitor:
    """Watches the device layer, one task per GPU, and keeps the hub's health state current."""

    def __init__(
        self,
        lib: DeviceLib,
        hub: HealthHub,
        devices: Sequence[NodeDevice],
        *,
        additional_ignored_xids: Collection[int] = (),
        xid_recovery_s: float | None = None,
        backoff: Callable[[], Backoff] = health_backoff,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Watch the GPUs behind ``devices``; ignore NVIDIA's default XIDs plus
        ``additional_ignored_xids``; see the module docs for ``xid_recovery_s``. ``backoff``
        makes each GPU's own retry delays."""
        self._lib = lib
        self._hub = hub
        self._by_gpu: dict[str, list[NodeDevice]] = {}
        self.set_devices(devices)
        self._ignored = DEFAULT_IGNORED_XIDS | frozenset(additional_ignored_xids)
        self._recovery_s = xid_recovery_s
        self._backoff = backoff
        self._clock = clock
        self._last_event: dict[str, float] = {}
        self._unmonitored: set[str] = set()
        self._watches: dict[str, HealthWatch] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stop = threading.Event()
        # Waits block in the device layer; a pool of its own keeps one thread per GPU from
        # starving the loop's default executor (which the rest of the plugin shares).
        self._executor = ThreadPoolExecutor(
            max_workers=_MAX_WATCH_THREADS, thread_name_prefix="gpu-health"
        )

    @property
    def ignored_xids(self) -> frozenset[int]:
        """Every XID this monitor ignores."""
        return self._ignored

    @property
    def watched_gpus(self) -> frozenset[str]:
        """UUIDs of the GPUs whose events are being watched now."""
        return frozenset(self._watches)

    async def _call(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def open(self) -> bool:
        """Subscribe to every GPU's events (before serving, so none is missed).

        A failure on one GPU is logged and marks that GPU's devices (``unmonitored``, or
        ``gpu-lost`` for a lost GPU), never fatal and never the other GPUs'; :meth:`run`
        retries it. Returns whether every GPU is watched.
        """
        opened = [await self._open_gpu(uuid) for uuid in list(self._by_gpu)]
        return all(opened)

    async def _open_gpu(self, uuid: str) -> bool:
        if uuid in self._watches:
            return True
        try:
            watch = await self._call(self._lib.watch_health, [uuid])
        except GpuLostError as exc:
            await self.handle(HealthEvent(HealthEventKind.GPU_LOST, uuid, description=str(exc)))
            return False
        except NvlibError as exc:
            log.error(
                "cannot watch GPU health; its devices marked unmonitored",
                extra={
                    "event": "health_watch_unavailable",
                    "gpu": uuid,
                    "error": str(exc),
                    "error_type": type(exc).__name__,
                },
            )
            await self._mark_unmonitored(uuid, str(exc))
            return False
        self._watches[uuid] = watch
        if uuid in self._unmonitored:
            log.info(
                "GPU health watch re-established",
                extra={"event": "health_watch_restored", "gpu": uuid},
            )
            await self._clear_unmonitored(uuid)
        return True

    async def run(self) -> None:
        """Watch every GPU until cancelled or stopped: a task per GPU, started for GPUs that
        appear and ended for GPUs that go; XID taints recover on time."""
        try:
            while not self._stop.is_set():
                self._supervise()
                await self.recover()
                await self._pause(_SUPERVISE_S)
        finally:
            # The tasks end by themselves within one wait; cancelling would free an event
            # set while a thread still waits on it.
            self._stop.set()
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
            self._tasks.clear()
            for uuid in list(self._watches):
                await self._close_watch(uuid)
            self._executor.shutdown(wait=False)

    def _supervise(self) -> None:
        for uuid, task in list(self._tasks.items()):
            if task.done():
                del self._tasks[uuid]
        for uuid in self._by_gpu:
            if uuid not in self._tasks:
                self._tasks[uuid] = asyncio.get_running_loop().create_task(
                    self._watch_gpu(uuid), name=f"gpu-health-{uuid}"
                )

    async def _watch_gpu(self, uuid: str) -> None:
        """One GPU's loop: open, wait, handle; on errors back off (this GPU only)."""
        backoff = self._backoff()
        try:
            while not self._stop.is_set() and uuid in self._by_gpu:
                watch = self._watches.get(uuid)
                if watch is None:
                    if not await self._open_gpu(uuid):
                        delay = backoff.next_delay()
                        log.debug(
                            "GPU health watch not open; retrying",
                            extra={
                                "event": "health_watch_retry",
                                "gpu": uuid,
                                "attempt": backoff.failures,
                                "retry_in_s": delay,
                            },
                        )
                        await self._pause(delay)
                    continue
                try:
                    event = await self._call(watch.wait, _WAIT_S)
                except Exception as exc:  # any failure: log, re-create, never end silently
                    await self._wait_failed(uuid, exc, backoff)
                    continue
                backoff.reset()  # only a wait that worked resets the backoff
                if event is not None:
                    await self.handle(event)
        finally:
            await self._close_watch(uuid)

    async def _wait_failed(self, uuid: str, exc: Exception, backoff: Backoff) -> None:
        delay = backoff.next_delay()
        attempt = backoff.failures
        lost = isinstance(exc, GpuLostError)
        extra = {
            "event": "health_watch_gpu_lost" if lost else "health_watch_error",
            "gpu": uuid,
            "error": str(exc),
            "error_type": type(exc).__name__,
            "attempt": attempt,
            "retry_in_s": delay,
        }
        if not lost:
            log.error(
                "waiting for GPU health events failed; re-creating its event set", extra=extra
            )
        else:
            # Lost stays lost until a reset; one warning, then quiet retries.
            level = logging.WARNING if attempt == 1 else logging.DEBUG
            log.log(level, "GPU is lost; watching it again with backoff", extra=extra)
            await self.handle(HealthEvent(HealthEventKind.GPU_LOST, uuid, description=str(exc)))
        await self._close_watch(uuid)
        await self._pause(delay)

    async def _close_watch(self, uuid: str) -> None:
        watch = self._watches.pop(uuid, None)
        if watch is not None:
            try:
                await self._call(watch.close)
            except Exception as exc:  # closing a broken event set may fail too: not fatal
                log.warning(
                    "closing the GPU health watch failed",
                    extra={"event": "health_watch_close_failed", "gpu": uuid, "error": str(exc)},
                )

    async def _pause(self, seconds: float) -> None:
        deadline = self._clock() + seconds
        while not self._stop.is_set():
            remaining = deadline - self._clock()
            if remaining <= 0:
                return
            await asyncio.sleep(min(remaining, 0.1))

    async def _mark_unmonitored(self, uuid: str, reason: str) -> None:
        self._unmonitored.add(uuid)
        for device in self._by_gpu.get(uuid, []):
            current = self._hub.get(device.name)
            if current is not None and not current.healthy:
                continue  # keep the more specific taint (XID, lost GPU)
            await self._hub.mark_unhealthy(
                device.name,
                message=f"GPU health is not monitored: {reason}",
                taint_key=TAINT_UNMONITORED,
                unknown=True,
            )

    async def _clear_unmonitored(self, uuid: str) -> None:
        self._unmonitored.discard(uuid)
        for device in self._by_gpu.get(uuid, []):
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
