"""Time-slicing of full GPUs: applied per GPU of a claim, reset by the last claim using it.

Applying follows ``nvidia-smi -c DEFAULT`` then ``nvidia-smi compute-policy --set-timeslice``,
as NVIDIA's driver does. Several claims may hold one GPU (consumable shares); they must agree
on the interval, and the GPU goes back to the Default slice only when the last of them is
unprepared. A GPU that cannot time-slice fails the claim with the GPU and the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from dra_nvlib import ComputeMode, DeviceError, DeviceLib, TimeSliceLevel

from dra_sharing.errors import SharingApplyError

__all__ = ["TimeSlicer", "levels_to_reset"]

log = logging.getLogger(__name__)


def levels_to_reset(mine: Mapping[str, int], others: Mapping[str, set[int]]) -> list[str]:
    """GPUs of ``mine`` that no other claim time-slices: they go back to Default (pure)."""
    return sorted(gpu for gpu in mine if not others.get(gpu))


def _name(level: int) -> str:
    return TimeSliceLevel(level).name.title()


class TimeSlicer:
    """Applies and resets time-slice levels through the device layer."""

    def __init__(self, lib: DeviceLib) -> None:
        """``lib`` is the node's device layer (NVML or fake)."""
        self._lib = lib

    def apply(
        self, levels: Mapping[str, TimeSliceLevel], others: Mapping[str, set[int]]
    ) -> dict[str, int]:
        """Set each GPU's level; returns what was set (for the claim's state).

        ``others`` are the levels other prepared claims hold per GPU. On a failure the GPUs
        already changed by this call are reset (where no other claim holds them) first.

        Raises:
            SharingApplyError: another claim holds the GPU at a different interval, or the
                GPU refused (``NotSupportedError``: it cannot time-slice; MIG mode on; ...).
        """
        done: dict[str, int] = {}
        try:
            for gpu, level in sorted(levels.items()):
                held = others.get(gpu, set()) - {int(level)}
                if held:
                    shown = ", ".join(_name(x) for x in sorted(held))
                    raise SharingApplyError(
                        gpu=gpu,
                        operation="set time-slice",
                        message=f"interval {_name(level)} asked, but another prepared claim "
                        f"time-slices this GPU with interval {shown}",
                    )
                try:
                    self._lib.set_compute_mode(gpu, ComputeMode.DEFAULT)
                    self._lib.set_time_slice(gpu, level)
                except DeviceError as exc:
                    raise SharingApplyError(
                        gpu=gpu, operation="set time-slice", message=f"cannot time-slice: {exc}"
                    ) from exc
                done[gpu] = int(level)
                log.info(
                    "time-slice set",
                    extra={"event": "timeslice_set", "gpu": gpu, "interval": _name(level)},
                )
        except SharingApplyError:
            self.reset(done, others)
            raise
        return done

    def reset(self, mine: Mapping[str, int], others: Mapping[str, set[int]]) -> None:
        """Reset to Default the GPUs of ``mine`` that no other claim holds.

        Raises:
            SharingApplyError: a GPU refused the reset (the caller keeps the claim's state,
                so the kubelet's retry resets it again).
        """
        for gpu in levels_to_reset(mine, others):
            try:
                self._lib.set_time_slice(gpu, TimeSliceLevel.DEFAULT)
            except DeviceError as exc:
                raise SharingApplyError(
                    gpu=gpu, operation="reset time-slice", message=str(exc)
                ) from exc
            log.info("time-slice reset", extra={"event": "timeslice_reset", "gpu": gpu})
