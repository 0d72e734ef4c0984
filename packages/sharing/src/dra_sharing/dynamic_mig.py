"""Dynamic MIG: GPU and compute instances created at prepare, destroyed at unprepare.

Creating enables MIG mode first where it is off (refused where the architecture cannot do
MIG or needs a reset to switch); a partial failure destroys what this call created before
the error is raised. Destroying disables MIG mode again on Hopper and newer GPUs left
without MIG devices, as NVIDIA's driver does (older parts need a GPU reset for it). At start
:meth:`DynamicMig.destroy_unknown` removes every MIG device no prepared claim records, so a
crash between creating an instance and writing the checkpoint leaves nothing behind.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dra_nvlib import Architecture, DeviceError, DeviceLib, GpuNotFoundError

from dra_sharing.claim_state import CreatedMig
from dra_sharing.errors import SharingApplyError

__all__ = ["DynamicMig", "MigRequest"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MigRequest:
    """A MIG device to create for an allocated dynamic-MIG device."""

    device_name: str
    gpu_uuid: str
    profile_id: int
    placement_start: int


class DynamicMig:
    """Creates and destroys MIG devices through the device layer."""

    def __init__(self, lib: DeviceLib) -> None:
        """``lib`` is the node's device layer."""
        self._lib = lib

    def _enable_mig(self, gpu_uuid: str) -> None:
        info = self._lib.gpu(gpu_uuid)
        if info.mig_mode.current:
            return
        if not info.mig_capable:
            raise SharingApplyError(
                gpu=gpu_uuid,
                operation="enable MIG mode",
                message=f"{info.product_name} cannot do MIG",
            )
        state = self._lib.set_mig_mode(gpu_uuid, enabled=True)
        if not state.current:
            raise SharingApplyError(
                gpu=gpu_uuid,
                operation="enable MIG mode",
                message="MIG mode is pending until the GPU is reset; reset it and retry",
            )
        log.info("MIG mode enabled", extra={"event": "mig_mode_enabled", "gpu": gpu_uuid})

    def create(self, requests: Sequence[MigRequest]) -> tuple[CreatedMig, ...]:
        """Create every requested MIG device, or none.

        Raises:
            SharingApplyError: naming the GPU, the placement and the device layer's reason
                (overlap, exhausted profile, MIG mode not available, ...).
        """
        created: list[CreatedMig] = []
        try:
            for req in requests:
                where = (
                    f"create MIG device {req.device_name} (profile {req.profile_id} "
                    f"at {req.placement_start})"
                )
                try:
                    self._enable_mig(req.gpu_uuid)
                    mig = self._lib.create_mig_device(
                        req.gpu_uuid,
                        profile_id=req.profile_id,
                        placement_start=req.placement_start,
                    )
                except DeviceError as exc:
                    raise SharingApplyError(
                        gpu=req.gpu_uuid, operation=where, message=str(exc)
                    ) from exc
                created.append(
                    CreatedMig(
                        device_name=req.device_name,
                        gpu_uuid=req.gpu_uuid,
                        mig_uuid=mig.uuid,
                        profile_id=req.profile_id,
                        placement_start=req.placement_start,
                        gi_id=mig.gi_id,
                    )
                )
                log.info(
                    "MIG device created",
                    extra={
                        "event": "mig_created",
                        "gpu": req.gpu_uuid,
                        "mig_uuid": mig.uuid,
                        "device": req.device_name,
                    },
                )
        except SharingApplyError:
            self.destroy(created)
            raise
        return tuple(created)

    def destroy(self, created: Iterable[CreatedMig]) -> None:
        """Destroy the MIG devices (an already missing one is fine), then disable MIG mode on
        Hopper+ GPUs left without MIG devices.

        Raises:
            SharingApplyError: the first device that could not be destroyed (e.g. still in
                use; the others were still tried); the kubelet's retry tries again.
        """
        gpus: set[str] = set()
        first: SharingApplyError | None = None
        for mig in created:
            try:
                self._lib.destroy_mig_device(mig.mig_uuid)
            except GpuNotFoundError:
                pass
            except DeviceError as exc:
                failed = SharingApplyError(
                    gpu=mig.gpu_uuid,
                    operation=f"destroy MIG device {mig.mig_uuid}",
                    message=str(exc),
                )
                failed.__cause__ = exc
                first = first or failed
                continue
            gpus.add(mig.gpu_uuid)
            log.info(
                "MIG device destroyed",
                extra={"event": "mig_destroyed", "gpu": mig.gpu_uuid, "mig_uuid": mig.mig_uuid},
            )
        for gpu in sorted(gpus):
            self._disable_if_empty(gpu)
        if first is not None:
            raise first

    def _disable_if_empty(self, gpu_uuid: str) -> None:
        try:
            info = self._lib.gpu(gpu_uuid)
            if (
                info.mig_mode.current
                and not info.mig_devices
                and info.architecture >= Architecture.HOPPER
                and info.architecture is not Architecture.UNKNOWN
            ):
                self._lib.set_mig_mode(gpu_uuid, enabled=False)
        except DeviceError as exc:
            # MIG mode left on only wastes nothing: the next create reuses it.
            log.warning(str(exc), extra={"event": "mig_mode_disable_failed", "gpu": gpu_uuid})

    def destroy_unknown(self, keep: set[str]) -> list[str]:
        """Destroy every MIG device whose UUID is not in ``keep`` (start-up recovery)."""
        leftovers = [
            CreatedMig(
                device_name="",
                gpu_uuid=gpu.uuid,
                mig_uuid=mig.uuid,
                profile_id=mig.profile_id,
                placement_start=mig.placement.start,
                gi_id=mig.gi_id,
            )
            for gpu in self._lib.gpus()
            if gpu.mig_mode.current and not gpu.lost
            for mig in gpu.mig_devices
            if mig.uuid not in keep
        ]
        self.destroy(leftovers)
        return [m.mig_uuid for m in leftovers]
