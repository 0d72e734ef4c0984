"""Health events from NVML: XID and ECC events of an event set, and GPUs that fell off the bus."""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Sequence

from dra_nvlib.devicelib import HealthWatch
from dra_nvlib.facts import (
    HealthEvent,
    HealthEventKind,
)
from dra_nvlib.nvml_api import (
    EVENT_DOUBLE_BIT_ECC,
    EVENT_XID,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NOT_FOUND,
    EventSetHandle,
    NvmlApi,
    NvmlFailure,
)
from dra_nvlib.nvml_errors import translate

__all__ = ["NvmlHealthWatch"]


class NvmlHealthWatch(HealthWatch):
    """Waits on an NVML event set; a lost GPU is reported as a GPU_LOST event."""

    def __init__(
        self,
        api: NvmlApi,
        event_set: EventSetHandle,
        *,
        uuids: Sequence[str],
        lock: threading.RLock,
    ) -> None:
        self._api = api
        self._set = event_set
        self._uuids = list(uuids)
        self._lock = lock
        self._pending: collections.deque[HealthEvent] = collections.deque()
        self._reported_lost: set[str] = set()
        self._closed = False

    def _lost_gpus(self) -> list[HealthEvent]:
        events: list[HealthEvent] = []
        for uuid in self._uuids:
            if uuid in self._reported_lost:
                continue
            try:
                self._api.uuid(self._api.device_by_uuid(uuid))
            except NvmlFailure as exc:
                if exc.code == NVML_ERROR_GPU_IS_LOST:
                    self._reported_lost.add(uuid)
                    events.append(HealthEvent(HealthEventKind.GPU_LOST, uuid, description=str(exc)))
        return events

    def wait(self, timeout_s: float) -> HealthEvent | None:
        """Next XID/ECC/GPU-lost event, or ``None`` after ``timeout_s``.

        Raises:
            GpuLostError: a watched GPU is lost and was reported already.
        """
        if self._closed:
            raise RuntimeError("health watch is closed")
        if self._pending:
            return self._pending.popleft()
        try:
            raw = self._api.event_wait(self._set, max(int(timeout_s * 1000), 0))
        except NvmlFailure as exc:
            if exc.code != NVML_ERROR_GPU_IS_LOST:
                raise translate(exc, gpu="*", operation="watch_health") from exc
            with self._lock:
                self._pending.extend(self._lost_gpus())
            if self._pending:
                return self._pending.popleft()
            # NVML answers every later wait at once the same way: an error, not a timeout,
            # so the caller backs off instead of spinning on it.
            raise translate(exc, gpu=",".join(self._uuids), operation="watch_health") from exc
        if raw is None:
            return None
        if raw.event_type & EVENT_XID:
            kind = HealthEventKind.XID
        elif raw.event_type & EVENT_DOUBLE_BIT_ECC:
            kind = HealthEventKind.ECC_DOUBLE_BIT
        else:
            kind = HealthEventKind.ECC_SINGLE_BIT
        # 0xFFFFFFFF means "the whole GPU" for GI/CI ids.
        gi = raw.gi_id if raw.gi_id != 0xFFFFFFFF else None
        ci = raw.ci_id if raw.ci_id != 0xFFFFFFFF else None
        return HealthEvent(
            kind=kind,
            gpu_uuid=raw.gpu_uuid,
            xid=raw.event_data if kind is HealthEventKind.XID else None,
            gi_id=gi,
            ci_id=ci,
            mig_uuid=self._mig_uuid(raw.gpu_uuid, gi, ci),
            description=f"NVML event 0x{raw.event_type:x} data {raw.event_data}",
        )

    def _mig_uuid(self, gpu_uuid: str, gi: int | None, ci: int | None) -> str | None:
        """The UUID of the MIG device an event's GI/CI ids name, so that consumers taint only
        that MIG device; ``None`` for a whole-GPU event or when NVML cannot tell (then the
        event applies to the whole GPU, the safe side)."""
        if gi is None:
            return None
        try:
            with self._lock:
                dev = self._api.device_by_uuid(gpu_uuid)
                for index in range(self._api.max_mig_device_count(dev)):
                    try:
                        mig = self._api.mig_device_by_index(dev, index)
                    except NvmlFailure as exc:
                        if exc.code in (NVML_ERROR_NOT_FOUND, NVML_ERROR_INVALID_ARGUMENT):
                            continue
                        raise
                    if self._api.gi_id(mig) == gi and (ci is None or self._api.ci_id(mig) == ci):
                        return self._api.uuid(mig)
        except NvmlFailure:
            return None
        return None

    def close(self) -> None:
        """Free the NVML event set."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(NvmlFailure):
            self._api.event_set_free(self._set)
