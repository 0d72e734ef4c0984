"""The GPU driver's sharing step: from planned devices to :mod:`dra_sharing` and back.

Pure adapters around the sharing package, so the prepare path stays one call each way:

- :func:`shared_devices` and :func:`mig_requests` turn the planned devices of a claim into
  the sharing package's inputs (a device group is the set of devices one config applies to);
- :func:`claim_error` maps a sharing error to the per-claim error the kubelet gets, keeping
  the field it names;
- :func:`sharing_edits` renders what containers need for the sharing that was applied: the
  MPS pipe directory, shm and (fake backend) client, and on the fake backend the
  ``nvidia-smi`` entries showing each GPU's compute mode and time-slice as they are now;
- :func:`concrete_device` turns a dynamic MIG placement into the MIG device created for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dra_nvlib import GpuInfo, nvidia_smi_policy_env
from dra_sharing import (
    ClaimSharingState,
    MigRequest,
    MpsEdits,
    SharedDevice,
    SharingApplyError,
    SharingConfigError,
    SharingError,
)

from dra_kubelet_plugin.allocation import PlannedDevice
from dra_kubelet_plugin.cdi import ContainerEdits, Mount
from dra_kubelet_plugin.errors import ClaimError, ClaimRef, DeviceConfigError
from dra_kubelet_plugin.inventory import DeviceType, NodeDevice

__all__ = [
    "SharingFailedError",
    "claim_error",
    "concrete_device",
    "mig_requests",
    "shared_devices",
    "sharing_edits",
]


class SharingFailedError(ClaimError):
    """Sharing could not be applied on a GPU of the claim (names GPU and reason)."""


def shared_devices(planned: Sequence[PlannedDevice]) -> list[SharedDevice]:
    """The claim's devices as the sharing package takes them (one per distinct device)."""
    out: dict[str, SharedDevice] = {}
    for p in planned:
        out.setdefault(
            p.device.name,
            SharedDevice(
                request=p.request,
                device_name=p.device.name,
                uuid=p.device.uuid,
                gpu_uuid=p.device.gpu.uuid,
                is_mig=p.device.type is DeviceType.MIG,
                config=p.config,
                config_field=p.config_field,
            ),
        )
    return list(out.values())


def mig_requests(planned: Sequence[PlannedDevice]) -> list[MigRequest]:
    """The dynamic MIG placements of the claim, to be created at prepare."""
    out: dict[str, MigRequest] = {}
    for p in planned:
        d = p.device
        if d.dynamic and d.profile is not None and d.placement_start is not None:
            out.setdefault(
                d.name, MigRequest(d.name, d.gpu.uuid, d.profile.profile_id, d.placement_start)
            )
    return list(out.values())


def claim_error(ref: ClaimRef, exc: SharingError) -> ClaimError:
    """The per-claim error for a sharing failure."""
    if isinstance(exc, SharingConfigError):
        return DeviceConfigError(ref, f"request {exc.request!r}: {exc.message}", field=exc.field)
    if isinstance(exc, SharingApplyError):
        return SharingFailedError(ref, str(exc))
    return SharingFailedError(ref, str(exc))


def concrete_device(device: NodeDevice, state: ClaimSharingState, gpu: GpuInfo) -> NodeDevice:
    """The device as containers use it: a dynamic placement becomes the MIG device created
    for it (``gpu`` is its parent as enumerated after creation); others are unchanged."""
    if not device.dynamic:
        return device
    for created in state.created_migs:
        if created.device_name != device.name:
            continue
        for mig in gpu.mig_devices:
            if mig.uuid == created.mig_uuid:
                return NodeDevice(
                    name=device.name,
                    type=DeviceType.MIG,
                    gpu=gpu,
                    mig=mig,
                    profile=device.profile,
                    placement_start=device.placement_start,
                    partitionable=True,
                )
    raise SharingApplyError(
        gpu=device.gpu.uuid, operation=f"find MIG device of {device.name}", message="not created"
    )


def _mps_mounts(edits: MpsEdits) -> tuple[Mount, ...]:
    return tuple(
        Mount(host_path=host, container_path=container, options=("rw", "nosuid", "nodev", "bind"))
        for host, container in edits.mounts
    )


def sharing_edits(
    devices: Sequence[NodeDevice],
    mps: Mapping[str, MpsEdits],
    gpus_now: Mapping[str, GpuInfo],
    *,
    fake: bool,
) -> ContainerEdits:
    """Claim-wide edits for the sharing applied to ``devices``.

    ``mps`` maps device UUIDs to their daemon's edits; ``gpus_now`` are the claim's GPUs as
    enumerated after sharing was applied (the fake ``nvidia-smi`` shows their state).
    """
    env: dict[str, str] = {}
    mounts: dict[str, Mount] = {}
    for device in devices:
        edits = mps.get(device.uuid)
        if edits is not None:
            for item in edits.env:
                name, _, value = item.partition("=")
                env[name] = value
            for mount in _mps_mounts(edits):
                mounts.setdefault(mount.container_path, mount)
        if fake:
            gpu = gpus_now.get(device.gpu.uuid)
            if gpu is not None:
                name, _, value = nvidia_smi_policy_env(gpu).partition("=")
                env[name] = value
    return ContainerEdits(
        env=tuple(f"{k}={v}" for k, v in sorted(env.items())),
        mounts=tuple(mounts[k] for k in sorted(mounts)),
    )
