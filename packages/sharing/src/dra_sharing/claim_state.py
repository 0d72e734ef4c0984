"""What sharing did for one claim, as it is kept in the plugin's checkpoint (pure).

The kubelet plugin stores :meth:`ClaimSharingState.to_json` with the claim and hands it back
at unprepare and at start, so a restarted plugin knows which time-slices to reset, which
MPS daemons to stop and which MIG devices it created. Decoding is strict: a malformed entry
is an error naming the field, never a silently dropped device.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClaimSharingState", "CreatedMig", "MpsDaemonRecord", "StateDecodeError"]


class StateDecodeError(ValueError):
    """A stored sharing state does not have the expected shape (names the field)."""


@dataclass(frozen=True)
class MpsDaemonRecord:
    """One MPS control daemon started for a prepared device group."""

    daemon_id: str
    gpu_uuids: tuple[str, ...]
    device_uuids: tuple[str, ...]


@dataclass(frozen=True)
class CreatedMig:
    """A MIG device created at prepare (dynamic MIG)."""

    device_name: str
    gpu_uuid: str
    mig_uuid: str
    profile_id: int
    placement_start: int
    #: The GPU instance id NVML gave the device (dcgm-exporter's ``GPU_I_ID``); ``None`` in
    #: a checkpoint written before it was recorded.
    gi_id: int | None = None


@dataclass(frozen=True)
class ClaimSharingState:
    """Sharing applied for one claim."""

    #: full GPU UUID -> time-slice level set for this claim
    time_slices: dict[str, int] = field(default_factory=dict)
    mps_daemons: tuple[MpsDaemonRecord, ...] = ()
    created_migs: tuple[CreatedMig, ...] = ()

    @property
    def empty(self) -> bool:
        """True when sharing did nothing for the claim."""
        return not (self.time_slices or self.mps_daemons or self.created_migs)

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored in the checkpoint (camelCase keys)."""
        return {
            "timeSlices": dict(sorted(self.time_slices.items())),
            "mpsDaemons": [
                {
                    "id": d.daemon_id,
                    "gpuUUIDs": list(d.gpu_uuids),
                    "deviceUUIDs": list(d.device_uuids),
                }
                for d in self.mps_daemons
            ],
            "createdMIGs": [
                {
                    "deviceName": m.device_name,
                    "gpuUUID": m.gpu_uuid,
                    "migUUID": m.mig_uuid,
                    "profileID": m.profile_id,
                    "placementStart": m.placement_start,
                    # Absent when unknown, so an older plugin reads the entry as before.
                    **({} if m.gi_id is None else {"gpuInstanceID": m.gi_id}),
                }
                for m in self.created_migs
            ],
        }

    @classmethod
    def from_json(cls, doc: object) -> ClaimSharingState:
        """Decode :meth:`to_json` output; ``None`` or ``{}`` is the empty state.

        Raises:
            StateDecodeError: naming the field that has the wrong shape.
        """
        if doc is None:
            return cls()
        obj = _obj(doc, "sharing")
        slices = _obj(obj.get("timeSlices", {}), "sharing.timeSlices")
        time_slices = {str(k): _int(v, f"sharing.timeSlices[{k}]") for k, v in slices.items()}
        daemons = tuple(
            MpsDaemonRecord(
                daemon_id=_str(d.get("id"), f"sharing.mpsDaemons[{i}].id"),
                gpu_uuids=_strs(d.get("gpuUUIDs", []), f"sharing.mpsDaemons[{i}].gpuUUIDs"),
                device_uuids=_strs(
                    d.get("deviceUUIDs", []), f"sharing.mpsDaemons[{i}].deviceUUIDs"
                ),
            )
            for i, d in enumerate(
                _obj(x, f"sharing.mpsDaemons[{j}]")
                for j, x in enumerate(_list(obj.get("mpsDaemons", []), "sharing.mpsDaemons"))
            )
        )
        migs = tuple(
            CreatedMig(
                device_name=_str(m.get("deviceName"), f"sharing.createdMIGs[{i}].deviceName"),
                gpu_uuid=_str(m.get("gpuUUID"), f"sharing.createdMIGs[{i}].gpuUUID"),
                mig_uuid=_str(m.get("migUUID"), f"sharing.createdMIGs[{i}].migUUID"),
                profile_id=_int(m.get("profileID"), f"sharing.createdMIGs[{i}].profileID"),
                placement_start=_int(
                    m.get("placementStart"), f"sharing.createdMIGs[{i}].placementStart"
                ),
                gi_id=(
                    None
                    if m.get("gpuInstanceID") is None
                    else _int(m["gpuInstanceID"], f"sharing.createdMIGs[{i}].gpuInstanceID")
                ),
            )
            for i, m in enumerate(
                _obj(x, f"sharing.createdMIGs[{j}]")
                for j, x in enumerate(_list(obj.get("createdMIGs", []), "sharing.createdMIGs"))
            )
        )
        return cls(time_slices=time_slices, mps_daemons=daemons, created_migs=migs)


def in_use_time_slices(states: Iterable[ClaimSharingState]) -> dict[str, set[int]]:
    """GPU UUID -> the time-slice levels the given claims hold on it."""
    out: dict[str, set[int]] = {}
    for state in states:
        for gpu, level in state.time_slices.items():
            out.setdefault(gpu, set()).add(level)
    return out


def _obj(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise StateDecodeError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _list(value: object, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise StateDecodeError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise StateDecodeError(f"{where}: expected a non-empty string")
    return value


def _strs(value: object, where: str) -> tuple[str, ...]:
    return tuple(_str(v, f"{where}[{i}]") for i, v in enumerate(_list(value, where)))


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise StateDecodeError(f"{where}: expected an integer")
    return value
