"""Which sharing a claim asks for, per prepared device group and per GPU (pure).

The kubelet plugin resolves which opaque config applies to each allocated device; this module
turns those configs into a :class:`SharingPlan`. Devices that share one config object form a
*prepared device group* (NVIDIA's term): one MPS control daemon serves a whole group.

Rules, as NVIDIA's driver applies them, with the post-#1183 change that a device whose claim
asked for nothing gets nothing (no implicit time-slice):

- ``TimeSlicing`` needs the ``TimeSlicingSettings`` gate, ``MPS`` the ``MPSSupport`` gate;
- a time-slice interval applies to full GPUs only (MIG devices cannot be time-sliced; the
  strategy is accepted there and changes nothing);
- one GPU gets one sharing setting per claim: two groups of a claim asking for different
  strategies (or intervals) on the same physical GPU are an error;
- MPS pinned-memory limits are resolved against the group's UUIDs, sorted (an index key
  points into that list); an unknown UUID or index, or a limit under 1 MiB, is an error.

Every error is a :class:`~dra_sharing.errors.SharingConfigError` naming claim, request and
field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from dra_api_types import GpuConfig, MigDeviceConfig, ValidationError
from dra_api_types.nvidia_v1beta1 import MPS, TIME_SLICING, MpsConfig, TimeSlicingConfig
from dra_nvlib import TimeSliceLevel

from dra_sharing.errors import SharingConfigError, SharingGateError

__all__ = [
    "MpsSettings",
    "SharedDevice",
    "SharingGates",
    "SharingGroup",
    "SharingPlan",
    "Strategy",
    "resolve_sharing",
    "time_slice_level",
]


class Strategy(StrEnum):
    """The sharing a group gets."""

    NONE = "None"
    TIME_SLICING = TIME_SLICING
    MPS = MPS


@dataclass(frozen=True)
class SharingGates:
    """The feature gates that decide which strategies are allowed."""

    time_slicing: bool = False
    mps: bool = False


@dataclass(frozen=True)
class SharedDevice:
    """One allocated device as the plugin planned it.

    ``uuid`` is the device's own UUID (``GPU-``/``MIG-``; empty for a MIG device that is
    created at prepare), ``gpu_uuid`` its physical GPU. ``config`` is the decoded (not
    normalized) ``GpuConfig``/``MigDeviceConfig`` that applies, ``config_field`` where it
    came from (the group key; ``None`` when no config applies).
    """

    request: str
    device_name: str
    uuid: str
    gpu_uuid: str
    is_mig: bool
    config: object | None = None
    config_field: str | None = None
    #: The GPU's CUDA compute capability (major, minor); multi-user MPS needs Volta (7.0).
    compute_capability: tuple[int, int] | None = None


@dataclass(frozen=True)
class MpsSettings:
    """What the MPS control daemon of a group is told at start."""

    active_thread_percentage: int | None = None
    #: device UUID -> limit in whole MiB as the daemon takes it (``"1024M"``)
    pinned_memory_limits: dict[str, str] = field(default_factory=dict)
    #: ``mpsConfig.multiUser``: the daemon serves clients of every uid (``-M``).
    multi_user: bool = False


@dataclass(frozen=True)
class SharingGroup:
    """Devices sharing one config, and the sharing they get."""

    config_field: str | None
    strategy: Strategy
    devices: tuple[SharedDevice, ...]
    time_slice: TimeSliceLevel | None = None
    mps: MpsSettings | None = None

    @property
    def uuids(self) -> tuple[str, ...]:
        """The group's device UUIDs, sorted (the order per-device MPS limits index)."""
        return tuple(sorted({d.uuid for d in self.devices if d.uuid}))


@dataclass(frozen=True)
class SharingPlan:
    """The sharing of one claim."""

    claim: str
    groups: tuple[SharingGroup, ...]

    def time_slices(self) -> dict[str, TimeSliceLevel]:
        """Full GPU UUID -> the time-slice level this claim asks for."""
        out: dict[str, TimeSliceLevel] = {}
        for group in self.groups:
            if group.strategy is Strategy.TIME_SLICING and group.time_slice is not None:
                for device in group.devices:
                    if not device.is_mig:
                        out[device.gpu_uuid] = group.time_slice
        return out

    def mps_groups(self) -> tuple[SharingGroup, ...]:
        """The groups that need an MPS control daemon."""
        return tuple(g for g in self.groups if g.strategy is Strategy.MPS)

    @property
    def shares_anything(self) -> bool:
        """True when any group asks for a sharing strategy."""
        return any(g.strategy is not Strategy.NONE for g in self.groups)


def time_slice_level(interval: str | None) -> TimeSliceLevel:
    """``Default|Short|Medium|Long`` -> the level ``--set-timeslice`` takes."""
    return TimeSliceLevel(TimeSlicingConfig(interval=interval).interval_value())


def _join(prefix: str | None, suffix: str) -> str:
    if not suffix:
        return prefix or "opaque.parameters"
    return f"{prefix}.{suffix}" if prefix else suffix


def _group_devices(devices: Sequence[SharedDevice]) -> list[tuple[str | None, list[SharedDevice]]]:
    groups: dict[str | None, list[SharedDevice]] = {}
    for device in devices:
        groups.setdefault(device.config_field, []).append(device)
    return list(groups.items())


#: The oldest architecture whose MPS serves several uids (NVIDIA checks the same).
_VOLTA = (7, 0)


def _check_multi_user(claim: str, where: str | None, members: Sequence[SharedDevice]) -> None:
    for device in members:
        cc = device.compute_capability
        if cc is not None and cc < _VOLTA:
            raise SharingConfigError(
                claim=claim,
                request=device.request,
                field=_join(where, "sharing.mpsConfig.multiUser"),
                message="multiuser mode was requested but is not supported: device "
                f"{device.device_name} has CUDA compute capability {cc[0]}.{cc[1]}, "
                f"below {_VOLTA[0]}.{_VOLTA[1]} (Volta)",
            )


def _mps_settings(
    claim: str, request: str, where: str | None, mps: MpsConfig | None, uuids: list[str]
) -> MpsSettings:
    if mps is None:
        return MpsSettings()
    try:
        mps.validate_config()
        limits = mps.pinned_memory_limits(uuids)
    except ValidationError as exc:
        raise SharingConfigError(
            claim=claim,
            request=request,
            field=_join(where, f"sharing.mpsConfig.{exc.path}"),
            message=exc.message,
        ) from exc
    return MpsSettings(
        active_thread_percentage=mps.default_active_thread_percentage,
        pinned_memory_limits=limits,
        multi_user=bool(mps.multi_user),
    )


def _resolve_group(
    claim: str, where: str | None, members: list[SharedDevice], gates: SharingGates
) -> SharingGroup:
    first = members[0]
    config = first.config
    if config is None:
        return SharingGroup(where, Strategy.NONE, tuple(members))
    for device in members:
        wrong = (isinstance(config, MigDeviceConfig) and not device.is_mig) or (
            isinstance(config, GpuConfig) and device.is_mig
        )
        if wrong:
            kind = "mig" if device.is_mig else "gpu"
            raise SharingConfigError(
                claim=claim,
                request=device.request,
                field=_join(where, "kind"),
                message=f"cannot apply {type(config).__name__} to device {device.device_name} "
                f"of type {kind}",
            )
    if not isinstance(config, GpuConfig | MigDeviceConfig) or config.sharing is None:
        return SharingGroup(where, Strategy.NONE, tuple(members))
    sharing = config.sharing
    try:
        sharing.validate_config()
    except ValidationError as exc:
        raise SharingConfigError(
            claim=claim,
            request=first.request,
            field=_join(where, f"sharing.{exc.path}"),
            message=exc.message,
        ) from exc
    strategy = Strategy(sharing.strategy)
    gate, enabled = (
        ("TimeSlicingSettings", gates.time_slicing)
        if strategy is Strategy.TIME_SLICING
        else ("MPSSupport", gates.mps)
    )
    if not enabled:
        raise SharingGateError(
            claim=claim,
            request=first.request,
            field=_join(where, "sharing.strategy"),
            message=f"{strategy.value} is selected as the GPU sharing strategy, but the "
            f"{gate} feature gate is not enabled",
            gate=gate,
        )
    if strategy is Strategy.TIME_SLICING:
        interval = None
        if isinstance(config, GpuConfig) and config.sharing is not None:
            ts = config.sharing.time_slicing_config
            interval = ts.interval if ts is not None else None
        return SharingGroup(where, strategy, tuple(members), time_slice=time_slice_level(interval))
    uuids = sorted({d.uuid for d in members if d.uuid})
    settings = _mps_settings(claim, first.request, where, sharing.mps_config, uuids)
    if settings.multi_user:
        _check_multi_user(claim, where, members)
    return SharingGroup(where, strategy, tuple(members), mps=settings)


def _setting_of(group: SharingGroup, device: SharedDevice) -> str | None:
    """What the group does to the device's physical GPU, as a comparable label."""
    if group.strategy is Strategy.TIME_SLICING:
        if device.is_mig:
            return None  # a no-op on MIG devices, so it cannot conflict
        level = group.time_slice or TimeSliceLevel.DEFAULT
        return f"TimeSlicing (interval {level.name.title()})"
    if group.strategy is Strategy.MPS:
        return "MPS"
    return None


def resolve_sharing(
    claim: str, devices: Sequence[SharedDevice], gates: SharingGates
) -> SharingPlan:
    """The sharing plan of one claim.

    Raises:
        SharingConfigError: a strategy whose gate is off, settings of the other strategy,
            a thread percentage outside 0..100, an unknown device or a limit under 1 MiB in
            the per-device limits, a config of the wrong type for a device, or two
            different settings for one GPU in this claim.
    """
    groups = [
        _resolve_group(claim, where, members, gates) for where, members in _group_devices(devices)
    ]
    seen: dict[str, tuple[str, SharingGroup]] = {}
    for group in groups:
        for device in group.devices:
            setting = _setting_of(group, device)
            if setting is None:
                continue
            earlier = seen.get(device.gpu_uuid)
            if earlier is None:
                seen[device.gpu_uuid] = (setting, group)
                continue
            if earlier[0] != setting:
                raise SharingConfigError(
                    claim=claim,
                    request=device.request,
                    field=_join(group.config_field, "sharing.strategy"),
                    message=f"GPU {device.gpu_uuid} would get {setting} here but "
                    f"{earlier[0]} from {_join(earlier[1].config_field, 'sharing')}; "
                    "one GPU takes one sharing strategy per claim",
                )
    return SharingPlan(claim=claim, groups=tuple(groups))
