"""Applies a claim's sharing plan on the node and undoes it: the one entry point the kubelet
plugin calls while preparing and unpreparing.

:meth:`SharingManager.prepare` creates dynamic MIG devices, sets time-slices and starts MPS
daemons, in that order, and returns the :class:`~dra_sharing.claim_state.ClaimSharingState`
the plugin checkpoints with the claim; when a step fails, the steps before it are undone and
the error (naming GPU and reason) is raised for that claim only. :meth:`unprepare` undoes a
state, reference-counted against the other prepared claims (a GPU shared by consumable
shares keeps its time-slice until its last claim goes). :meth:`recover` runs at start and
removes MPS daemons and MIG devices that no prepared claim records (left by a crash), and
checks every daemon a prepared claim records: re-adopted if it answers, restarted if not.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dra_sharing.claim_state import (
    ClaimSharingState,
    CreatedMig,
    MpsDaemonRecord,
    in_use_time_slices,
)
from dra_sharing.dynamic_mig import DynamicMig, MigRequest
from dra_sharing.errors import SharingApplyError
from dra_sharing.mps import MpsDaemonManager, MpsDaemonSpec, MpsEdits, mps_daemon_id
from dra_sharing.resolve import MpsSettings, SharingPlan
from dra_sharing.timeslice import TimeSlicer

__all__ = ["RecoveryReport", "SharingManager"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecoveryReport:
    """What :meth:`SharingManager.recover` removed."""

    mps_daemons: list[str] = field(default_factory=list)
    mig_devices: list[str] = field(default_factory=list)
    #: daemons of prepared claims that were running and are kept as they are
    mps_adopted: list[str] = field(default_factory=list)
    #: daemons of prepared claims that were dead and were started again
    mps_restarted: list[str] = field(default_factory=list)
    #: claim UID -> why a daemon of that claim could not be started again
    failed_claims: dict[str, str] = field(default_factory=dict)


class SharingManager:
    """Sharing on one node: time-slicer, MPS daemons and dynamic MIG together."""

    def __init__(
        self,
        *,
        time_slicer: TimeSlicer,
        mps: MpsDaemonManager | None,
        dynamic_mig: DynamicMig | None,
    ) -> None:
        """``mps``/``dynamic_mig`` are ``None`` when their feature gate is off."""
        self._ts = time_slicer
        self._mps = mps
        self._mig = dynamic_mig

    def prepare(
        self,
        claim_uid: str,
        plan: SharingPlan,
        *,
        others: Iterable[ClaimSharingState],
        mig_requests: Sequence[MigRequest] = (),
    ) -> ClaimSharingState:
        """Apply ``plan`` (and create ``mig_requests``) for the claim; all or nothing.

        Raises:
            SharingApplyError: a step failed; what earlier steps did has been undone.
        """
        others = list(others)
        created: tuple[CreatedMig, ...] = ()
        slices: dict[str, int] = {}
        daemons: list[MpsDaemonRecord] = []
        held = in_use_time_slices(others)
        # A MIG device another claim already created for the same (shared) placement is
        # reused, and destroyed only when its last claim goes.
        existing = {m.device_name: m for s in others for m in s.created_migs}
        reused = tuple(existing[r.device_name] for r in mig_requests if r.device_name in existing)
        to_create = [r for r in mig_requests if r.device_name not in existing]
        try:
            _check_cross_claim(plan, others)
            if to_create:
                if self._mig is None:
                    raise SharingApplyError(
                        gpu=to_create[0].gpu_uuid,
                        operation="create MIG device",
                        message="the DynamicMIG feature gate is off",
                    )
                created = self._mig.create(to_create)
            slices = self._ts.apply(plan.time_slices(), held)
            for group in plan.mps_groups():
                if self._mps is None:
                    raise SharingApplyError(
                        gpu=group.devices[0].gpu_uuid,
                        operation="start MPS daemon",
                        message="the MPSSupport feature gate is off",
                    )
                uuids = group.uuids
                spec = MpsDaemonSpec(
                    daemon_id=mps_daemon_id(claim_uid, uuids),
                    gpu_uuids=tuple(sorted({d.gpu_uuid for d in group.devices})),
                    device_uuids=uuids,
                    settings=group.mps or MpsSettings(),
                )
                self._mps.start(spec)
                daemons.append(MpsDaemonRecord(spec.daemon_id, spec.gpu_uuids, uuids))
        except SharingApplyError:
            partial = ClaimSharingState(
                time_slices=slices, mps_daemons=tuple(daemons), created_migs=created
            )
            try:
                self.unprepare(partial, others=others)
            except SharingApplyError as undo:
                log.error(
                    str(undo), extra={"event": "sharing_rollback_failed", "claim_uid": claim_uid}
                )
            raise
        return ClaimSharingState(
            time_slices=slices, mps_daemons=tuple(daemons), created_migs=reused + created
        )

    def unprepare(self, state: ClaimSharingState, *, others: Iterable[ClaimSharingState]) -> None:
        """Undo ``state``: stop its MPS daemons, reset time-slices no other claim holds,
        destroy its MIG devices. Idempotent, so a failed unprepare is simply retried.

        Raises:
            SharingApplyError: the first step that failed (later steps still ran).
        """
        first: SharingApplyError | None = None
        if self._mps is not None:
            for daemon in state.mps_daemons:
                try:
                    self._mps.stop(daemon.daemon_id, daemon.gpu_uuids)
                except SharingApplyError as exc:
                    first = first or exc
        others = list(others)
        try:
            self._ts.reset(state.time_slices, in_use_time_slices(others))
        except SharingApplyError as exc:
            first = first or exc
        shared = {m.mig_uuid for s in others for m in s.created_migs}
        mine = [m for m in state.created_migs if m.mig_uuid not in shared]
        if mine:
            if self._mig is None:
                first = first or SharingApplyError(
                    gpu=mine[0].gpu_uuid,
                    operation="destroy MIG device",
                    message="the DynamicMIG feature gate is off; destroy it by hand",
                )
            else:
                try:
                    self._mig.destroy(mine)
                except SharingApplyError as exc:
                    first = first or exc
        if first is not None:
            raise first

    def recover(
        self, prepared: Mapping[str, ClaimSharingState], *, unknown: Collection[str] = ()
    ) -> RecoveryReport:
        """Remove daemons and MIG devices no prepared claim records (at start, and again
        while serving until it succeeds). ``unknown`` are claims whose state was lost but
        whose CDI spec still serves: their daemons (named after the claim) are kept, and so is
        every MIG device, since a MIG device does not say which claim created it.

        Raises:
            SharingApplyError: the first leftover that could not be removed (the others were
                still tried).
        """
        daemons: list[str] = []
        migs: list[str] = []
        first: SharingApplyError | None = None
        checked = _DaemonCheck()
        if self._mps is not None:
            recorded = {d.daemon_id: uid for uid, s in prepared.items() for d in s.mps_daemons}
            lost = set(unknown)
            on_disk = {d: d.rsplit("-", 1)[0] for d in self._mps.known()}
            kept_lost = {d: uid for d, uid in on_disk.items() if uid in lost}
            try:
                daemons = self._mps.stop_unknown(set(recorded) | set(kept_lost))
            except SharingApplyError as exc:
                first = exc
            checked = _check_daemons(self._mps, {**kept_lost, **recorded})
        if self._mig is not None and unknown:
            log.warning(
                "MIG devices no claim records are kept: claims with lost state still serve",
                extra={"event": "mig_leftovers_kept", "claims": sorted(unknown)},
            )
        elif self._mig is not None:
            keep_migs = {m.mig_uuid for s in prepared.values() for m in s.created_migs}
            try:
                migs = self._mig.destroy_unknown(keep_migs)
            except SharingApplyError as exc:
                first = first or exc
        if daemons or migs:
            log.warning(
                "removed sharing left by a crash",
                extra={
                    "event": "sharing_leftovers_removed",
                    "mps_daemons": daemons,
                    "mig_devices": migs,
                },
            )
        if first is not None:
            raise first
        return RecoveryReport(
            mps_daemons=daemons,
            mig_devices=migs,
            mps_adopted=checked.adopted,
            mps_restarted=checked.restarted,
            failed_claims=checked.failed,
        )

    def mps_edits(self, state: ClaimSharingState) -> dict[str, MpsEdits]:
        """Device UUID -> the container edits of the MPS daemon serving it."""
        if self._mps is None:
            return {}
        out: dict[str, MpsEdits] = {}
        for daemon in state.mps_daemons:
            edits = self._mps.edits(daemon.daemon_id)
            for uuid in daemon.device_uuids:
                out[uuid] = edits
        return out


@dataclass
class _DaemonCheck:
    adopted: list[str] = field(default_factory=list)
    restarted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def _check_daemons(mps: MpsDaemonManager, owners: Mapping[str, str]) -> _DaemonCheck:
    """Re-adopt or restart each daemon of ``owners`` (daemon ID -> claim UID); a failure
    is that claim's and the others are still checked."""
    out = _DaemonCheck()
    for daemon_id in sorted(owners):
        uid = owners[daemon_id]
        try:
            outcome = mps.ensure(daemon_id)
        except SharingApplyError as exc:
            log.error(
                f"MPS control daemon of a prepared claim could not be restarted: {exc}",
                extra={
                    "event": "mps_daemon_restart_failed",
                    "claim_uid": uid,
                    "daemon_id": daemon_id,
                },
            )
            out.failed.setdefault(uid, str(exc))
            continue
        (out.adopted if outcome == "adopted" else out.restarted).append(daemon_id)
    return out


def _check_cross_claim(plan: SharingPlan, others: Sequence[ClaimSharingState]) -> None:
    """One MPS control daemon per GPU, and never next to another claim's time-slicing: a
    GPU shared by several claims (consumable shares) cannot mix them."""
    mps_gpus = {gpu for s in others for d in s.mps_daemons for gpu in d.gpu_uuids}
    sliced = set(in_use_time_slices(others))
    for group in plan.mps_groups():
        for device in group.devices:
            if device.gpu_uuid in mps_gpus:
                raise SharingApplyError(
                    gpu=device.gpu_uuid,
                    operation="start MPS daemon",
                    message="another prepared claim runs an MPS control daemon on this GPU",
                )
            if device.gpu_uuid in sliced:
                raise SharingApplyError(
                    gpu=device.gpu_uuid,
                    operation="start MPS daemon",
                    message="another prepared claim time-slices this GPU",
                )
    for gpu in plan.time_slices():
        if gpu in mps_gpus:
            raise SharingApplyError(
                gpu=gpu,
                operation="set time-slice",
                message="another prepared claim runs an MPS control daemon on this GPU",
            )
