"""The GPU driver's sharing step: from planned devices to :mod:`dra_sharing` and back.

Pure adapters around the sharing package, so the prepare path stays one call each way:

- :func:`shared_devices` and :func:`mig_requests` turn the planned devices of a claim into
  the sharing package's inputs (a device group is the set of devices one config applies to);
- :func:`claim_error` maps a sharing error to the per-claim error the kubelet gets, keeping
  the field it names;
- :func:`sharing_edits` renders what containers need for the sharing that was applied: the
  MPS pipe directory, shm and (fake backend) client, and the env the backend's edits show
  each GPU's compute mode and time-slice with as they are now (the fake ``nvidia-smi``'s
  entries; nothing on real GPUs);
- :func:`concrete_device` turns a dynamic MIG placement into the MIG device created for it;
- :class:`GpuSharing` runs the step for the driver: resolution at plan time, the side effects
  at prepare and unprepare (reference-counted against the other claims of the checkpoint read
  under the node lock), recovery at start; where MPS daemons run as Deployments, recovery
  also deletes the daemon Deployments of this node whose claim is no longer prepared
  (:class:`MpsOrphans`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from dra_kubelet_core.cdi import ContainerEdits, Mount
from dra_kubelet_core.errors import (
    ClaimError,
    ClaimRef,
    DeviceConfigError,
    PluginError,
    RecoveryError,
    UnsupportedConfigError,
)
from dra_nvlib import DeviceError, DeviceLib, GpuInfo
from dra_sharing import (
    ClaimSharingState,
    MigRequest,
    MpsEdits,
    RecoveryReport,
    SharedDevice,
    SharingApplyError,
    SharingConfigError,
    SharingError,
    SharingGateError,
    SharingGates,
    SharingManager,
    SharingPlan,
    resolve_sharing,
)

from dra_kubelet_plugin.allocation import PlannedDevice
from dra_kubelet_plugin.container_edits import EditsProvider
from dra_kubelet_plugin.inventory import DeviceType, NodeDevice
from dra_kubelet_plugin.mps_deployment import OrphanDaemon

__all__ = [
    "STATE_KEY",
    "GpuSharing",
    "MpsOrphans",
    "SharingFailedError",
    "SharingResult",
    "SharingStep",
    "claim_error",
    "concrete_device",
    "intended_state",
    "mig_requests",
    "plan_sharing",
    "shared_devices",
    "sharing_edits",
    "state_of",
]

log = logging.getLogger(__name__)


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
                compute_capability=(
                    p.device.gpu.cuda_compute_capability.major,
                    p.device.gpu.cuda_compute_capability.minor,
                ),
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
    if isinstance(exc, SharingGateError):
        return UnsupportedConfigError(
            ref, f"request {exc.request!r}: {exc.message}", field=exc.field
        )
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
    gpu_env: Callable[[GpuInfo], Sequence[str]],
) -> ContainerEdits:
    """Claim-wide edits for the sharing applied to ``devices``.

    ``mps`` maps device UUIDs to their daemon's edits; ``gpus_now`` are the claim's GPUs as
    enumerated after sharing was applied, and ``gpu_env`` the env that shows a GPU's state
    (:meth:`EditsProvider.sharing_env`).
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
        gpu = gpus_now.get(device.gpu.uuid)
        if gpu is not None:
            for item in gpu_env(gpu):
                name, _, value = item.partition("=")
                env[name] = value
    return ContainerEdits(
        env=tuple(f"{k}={v}" for k, v in sorted(env.items())),
        mounts=tuple(mounts[k] for k in sorted(mounts)),
    )


@dataclass(frozen=True)
class SharingStep:
    """What plan time decided about a claim's sharing (handed to prepare in-process)."""

    plan: SharingPlan
    mig_requests: tuple[MigRequest, ...]

    @property
    def needed(self) -> bool:
        """Whether prepare has side effects to run for sharing."""
        return self.plan.shares_anything or bool(self.mig_requests)


@dataclass(frozen=True)
class SharingResult:
    """What prepare did: the state to checkpoint, the devices as containers use them (dynamic
    MIG placements replaced by the created MIG devices) and the claim-wide edits."""

    state: ClaimSharingState
    devices: tuple[NodeDevice, ...]
    edits: ContainerEdits


#: Key of the sharing state in the claim's checkpointed ``driver_state``.
STATE_KEY = "sharing"


def state_of(driver_state: Mapping[str, object]) -> ClaimSharingState:
    """The sharing state stored in a claim's ``driver_state`` (empty when none).

    Raises:
        StateDecodeError: the stored state is malformed (names the field).
    """
    return ClaimSharingState.from_json(driver_state.get(STATE_KEY))


def intended_state(step: SharingStep) -> ClaimSharingState:
    """What prepare is about to change that nothing else finds again after a crash: the
    claim's time-slices (pure). Recorded before the side effects, so an unprepare of a claim
    whose prepare was killed still resets them; MPS daemons and MIG devices need no such
    record, as start-up recovery finds them on disk and on the GPUs."""
    return ClaimSharingState(time_slices={g: int(v) for g, v in step.plan.time_slices().items()})


def plan_sharing(
    ref: ClaimRef, planned: Sequence[PlannedDevice], gates: SharingGates
) -> SharingStep:
    """Resolve the claim's sharing (pure).

    Raises:
        ClaimError: a bad sharing config (names the claim, request and field); a strategy
            whose gate is off is an ``UnsupportedConfigError``.
    """
    try:
        plan = resolve_sharing(f"{ref.namespace}/{ref.name}", shared_devices(planned), gates)
    except SharingError as exc:
        raise claim_error(ref, exc) from exc
    return SharingStep(plan=plan, mig_requests=tuple(mig_requests(planned)))


class MpsOrphans(Protocol):
    """Finds and deletes MPS daemons that outlived their claim outside the plugin's
    directory (:class:`~dra_kubelet_plugin.mps_deployment.DeploymentMpsLauncher`)."""

    def orphans(self, live_claim_uids: set[str]) -> list[OrphanDaemon]:
        """Delete the daemons whose claim is not in ``live_claim_uids``; return each (with
        the error of a delete that failed).

        Raises:
            PluginError: they could not be listed.
        """
        ...


class GpuSharing:
    """The GPU driver's sharing: resolution at plan time, side effects at prepare and
    unprepare, recovery at start. Keeps no state between calls: time-slices, MPS daemons and
    shared MIG devices are reference-counted against the sharing states of the other claims
    that the caller read from the checkpoint under the node lock (``others``), so a second
    plugin instance's claims count too."""

    def __init__(
        self,
        *,
        lib: DeviceLib,
        manager: SharingManager,
        gates: SharingGates,
        edits: EditsProvider,
        orphans: MpsOrphans | None = None,
    ) -> None:
        """``lib`` re-enumerates GPUs after sharing changed them; ``edits`` (the backend's)
        adds the env that shows the sharing to the container's tools; ``orphans``: the MPS
        daemons run as Deployments, and recovery deletes those of claims no longer
        prepared."""
        self._lib = lib
        self._manager = manager
        self._gates = gates
        self._edits = edits
        self._orphans = orphans

    def plan(self, ref: ClaimRef, planned: Sequence[PlannedDevice]) -> SharingStep:
        """Resolve the claim's sharing (pure); see :func:`plan_sharing`."""
        return plan_sharing(ref, planned, self._gates)

    async def prepare(
        self,
        ref: ClaimRef,
        step: SharingStep,
        devices: Sequence[NodeDevice],
        *,
        others: Sequence[ClaimSharingState],
    ) -> SharingResult:
        """Apply the claim's sharing; all or nothing. ``others``: the sharing states of the
        node's other prepared claims.

        Raises:
            ClaimError: sharing could not be applied (names the GPU and the reason).
        """
        try:
            state = await asyncio.to_thread(
                self._manager.prepare,
                ref.uid,
                step.plan,
                others=others,
                mig_requests=step.mig_requests,
            )
        except SharingError as exc:
            raise claim_error(ref, exc) from exc
        try:
            gpus_now = {g.uuid: g for g in await asyncio.to_thread(self._lib.gpus)}
            concrete = tuple(
                concrete_device(d, state, gpus_now.get(d.gpu.uuid, d.gpu)) for d in devices
            )
        except (SharingError, DeviceError) as exc:
            await self.unprepare(ref.uid, state, others=others)
            raise SharingFailedError(ref, str(exc)) from exc
        edits = sharing_edits(
            concrete, self._manager.mps_edits(state), gpus_now, gpu_env=self._edits.sharing_env
        )
        return SharingResult(state=state, devices=concrete, edits=edits)

    async def unprepare(
        self, uid: str, state: ClaimSharingState, *, others: Sequence[ClaimSharingState]
    ) -> None:
        """Undo a claim's sharing (idempotent), counted against ``others`` (the sharing
        states of the node's other prepared claims).

        Raises:
            PluginError: a step failed; the kubelet retries.
        """
        if state.empty:
            return
        try:
            await asyncio.to_thread(self._manager.unprepare, state, others=others)
        except SharingError as exc:
            raise PluginError(f"claim {uid}: undo sharing: {exc}") from exc

    async def recover(
        self,
        completed: Mapping[str, ClaimSharingState],
        started: Mapping[str, ClaimSharingState],
        *,
        unknown: Collection[str] = (),
        refs: Mapping[str, ClaimRef] | None = None,
    ) -> None:
        """Undo the sharing of half-prepared claims (the kubelet prepares them again), remove
        daemons and MIG devices no completed claim records, and check each daemon a completed
        claim records: re-adopted if it answers, restarted with its recorded settings if it
        died with the plugin's container. What may belong to the ``unknown`` claims (state
        lost, spec still serving) is kept, and their daemons are checked too. With daemons as
        Deployments, those of this node whose claim is none of the checkpoint's are deleted
        (:meth:`_delete_orphans`). ``refs`` name the claims in logs and errors. Every step is
        tried.

        Raises:
            RecoveryError: what could not be undone, removed, restarted or deleted (each claim
                named); the engine retries recovery while the plugin serves.
        """
        refs = refs or {}
        kept = [s for s in completed.values() if not s.empty]
        failures: list[str] = []
        for uid, state in started.items():
            if state.empty:
                continue
            try:
                await asyncio.to_thread(self._manager.unprepare, state, others=kept)
            except SharingError as exc:
                log.error(str(exc), extra={"event": "sharing_recovery_failed", "claim_uid": uid})
                failures.append(f"claim {uid}: undo sharing: {exc}")
        try:
            report = await asyncio.to_thread(
                self._manager.recover,
                {u: s for u, s in completed.items() if not s.empty},
                unknown=unknown,
            )
        except SharingError as exc:
            failures.append(f"sharing leftovers: {exc}")
        else:
            _log_report(report)
            for uid, problem in sorted(report.failed_claims.items()):
                ref = refs.get(uid, ClaimRef(namespace="", name="", uid=uid))
                log.error(
                    "MPS control daemon of a prepared claim is down; its pods lose MPS until "
                    "it is restarted (retried while the plugin serves)",
                    extra={
                        "event": "mps_daemon_down",
                        "claim_uid": uid,
                        "claim_namespace": ref.namespace,
                        "claim_name": ref.name,
                        "error": problem,
                    },
                )
                failures.append(f"{ref}: MPS control daemon not restarted: {problem}")
        # Every claim of the checkpoint keeps its Deployment: a half-prepared one's was
        # stopped above if it was its own, and a rebuilt one's state is unknown.
        failures += await self._delete_orphans({*completed, *started, *unknown})
        if failures:
            raise RecoveryError("; ".join(failures))

    async def _delete_orphans(self, live: set[str]) -> list[str]:
        """Delete the daemon Deployments of claims not in ``live`` (none without
        ``orphans``); each is logged with its claim UID. Returns what failed."""
        if self._orphans is None:
            return []
        try:
            found = await asyncio.to_thread(self._orphans.orphans, live)
        except PluginError as exc:
            log.error(str(exc), extra={"event": "mps_orphans_list_failed"})
            return [str(exc)]
        failures: list[str] = []
        for orphan in found:
            extra = {"claim_uid": orphan.claim_uid, "deployment": orphan.name}
            if orphan.error is None:
                log.warning(
                    "MPS daemon Deployment of a claim no longer prepared deleted",
                    extra={"event": "mps_orphan_deleted", **extra},
                )
                continue
            log.error(
                "MPS daemon Deployment of a claim no longer prepared not deleted; retried "
                "while the plugin serves",
                extra={"event": "mps_orphan_delete_failed", "error": orphan.error, **extra},
            )
            failures.append(
                f"MPS daemon Deployment {orphan.name} (claim {orphan.claim_uid}) not "
                f"deleted: {orphan.error}"
            )
        return failures


def _log_report(report: RecoveryReport) -> None:
    if report.mps_daemons or report.mig_devices:
        log.info(
            "sharing leftovers removed",
            extra={
                "event": "sharing_recovered",
                "mps_daemons": report.mps_daemons,
                "mig_devices": report.mig_devices,
            },
        )
    if report.mps_adopted or report.mps_restarted:
        log.info(
            "MPS control daemons of prepared claims checked",
            extra={
                "event": "mps_daemons_checked",
                "adopted": report.mps_adopted,
                "restarted": report.mps_restarted,
            },
        )
