"""The ``gpu.nvidia.com`` driver on top of the core: implements
:class:`~dra_kubelet_core.driver.Driver` for full GPUs and MIG devices.

Planning resolves each result to a published :class:`NodeDevice`, decodes its
``resource.nvidia.com/v1beta1`` config and resolves the claim's sharing
(:mod:`dra_kubelet_plugin.gpu_sharing`); preparing applies the sharing (time-slices, MPS
daemons, dynamic MIG devices; checkpointed in the claim's ``driver_state``) and renders the
backend's CDI edits (and, for the fake backend, the per-claim host files that
:meth:`GpuDriver.unprepare` removes); ``vfio`` devices (gate ``PassthroughSupport``) are
switched to ``vfio-pci`` by :class:`~dra_kubelet_plugin.passthrough_claims.PassthroughClaims`;
with ``FabricManagerPartitioning`` the claim's Fabric Manager partition is activated first
(:class:`~dra_kubelet_plugin.partition_claims.PartitionClaims`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from dra_api_types import ResourceClaim
from dra_kubelet_core.allocated import AllocatedDevice
from dra_kubelet_core.allocation_info import DeviceIdentity
from dra_kubelet_core.cdi import ContainerEdits
from dra_kubelet_core.checkpoint import (
    Checkpoint,
    ClaimState,
    PreparedClaim,
    PreparedDevice,
    count_prepared_devices,
)
from dra_kubelet_core.driver import ClaimEdits, ClaimPlan, DriverIdentity, PrepareContext
from dra_kubelet_core.errors import CheckpointError, ClaimRef, PluginError, RecoveryError
from dra_sharing import ClaimSharingState, SharingGates, StateDecodeError

from dra_kubelet_plugin.allocation import PlannedDevice, plan_claim
from dra_kubelet_plugin.cdi import GPU_CDI, cdi_device_id
from dra_kubelet_plugin.container_edits import EditsProvider
from dra_kubelet_plugin.device_config import decode_device_config
from dra_kubelet_plugin.gpu_sharing import (
    STATE_KEY,
    GpuSharing,
    SharingStep,
    intended_state,
    plan_sharing,
    state_of,
)
from dra_kubelet_plugin.inventory import DeviceType, NodeDevice
from dra_kubelet_plugin.partition_claims import PartitionClaims
from dra_kubelet_plugin.passthrough_claims import PassthroughClaims

__all__ = ["GpuDriver", "GpuPlan", "gpu_identity", "prepared_device_types"]

log = logging.getLogger(__name__)

#: The GPU driver's own plan of a claim: its planned devices and its sharing step.
GpuPlan = tuple[list[PlannedDevice], SharingStep]


def gpu_identity(driver_name: str) -> DriverIdentity:
    """The GPU plugin's identity: CDI ``k8s.gpu.nvidia.com/claim``, events from
    ``gpu.nvidia.com-kubelet-plugin``."""
    return DriverIdentity(name=driver_name, cdi=GPU_CDI)


class GpuDriver:
    """Plans and prepares claims on the node's GPUs and MIG devices."""

    def __init__(
        self,
        *,
        driver_name: str,
        devices: Sequence[NodeDevice],
        edits: EditsProvider,
        sharing: GpuSharing | None = None,
        passthrough: PassthroughClaims | None = None,
        partitions: PartitionClaims | None = None,
    ) -> None:
        """Serve ``devices`` (replaced by :meth:`set_devices`) with the backend's ``edits``;
        ``sharing`` applies time-slicing, MPS and dynamic MIG (``None``: a sharing config is
        refused as with every sharing gate off); ``passthrough`` (gate ``PassthroughSupport``)
        prepares the ``vfio`` devices; ``partitions`` (gate ``FabricManagerPartitioning`` on a
        node with Fabric Manager) activates each claim's partition."""
        self._identity = gpu_identity(driver_name)
        self._devices = {d.name: d for d in devices}
        self._edits = edits
        self._sharing = sharing
        self.passthrough = passthrough
        self.partitions = partitions

    @property
    def identity(self) -> DriverIdentity:
        """See :meth:`Driver.identity`."""
        return self._identity

    @property
    def devices(self) -> dict[str, NodeDevice]:
        """Published devices by name."""
        return dict(self._devices)

    def set_devices(self, devices: Sequence[NodeDevice]) -> None:
        """Replace the published devices (the hardware changed); prepared claims keep theirs."""
        self._devices = {d.name: d for d in devices}

    def plan(
        self, ref: ClaimRef, claim: ResourceClaim, allocated: Sequence[AllocatedDevice]
    ) -> ClaimPlan[GpuPlan]:
        """See :meth:`Driver.plan`: devices, configs and the claim's sharing (pure)."""
        del claim  # everything the GPU plan needs is in the results and their configs
        planned = plan_claim(allocated, ref, devices=self._devices, decode=decode_device_config)
        if self._sharing is not None:
            step = self._sharing.plan(ref, planned)
        else:
            step = plan_sharing(ref, planned, SharingGates())
        prepared = tuple(
            PreparedDevice(
                request_names=(p.request,),
                pool_name=p.pool_name,
                device_name=p.device.name,
                cdi_device_ids=(cdi_device_id(ref.uid, p.device.name),),
                admin_access=p.admin_access,
                share_id=p.share_id,
            )
            for p in planned
        )
        return ClaimPlan(devices=prepared, detail=(planned, step))

    async def prepare(
        self, ref: ClaimRef, plan: ClaimPlan[GpuPlan], ctx: PrepareContext
    ) -> ClaimEdits:
        """See :meth:`Driver.prepare`: the Fabric Manager partition first (as NVIDIA
        activates it before applying configs), then the ``vfio`` devices' switch (
        :class:`PassthroughClaims` records its progress), then the claim's sharing (recorded in
        the checkpoint before the spec is written), then the backend's edits (fake: writes host
        files)."""
        planned, step = plan.detail
        if self.partitions is not None:
            await self.partitions.prepare(ref, planned, ctx)
        vfio: dict[str, ContainerEdits] = {}
        if self.passthrough is not None:
            vfio = await self.passthrough.prepare(ref, planned, self._devices.values(), ctx)
        # Several results may name one device (admin access, shares): one CDI device each.
        unique: dict[str, NodeDevice] = {p.device.name: p.device for p in planned}
        # The driver's files and control nodes only for containers that use a GPU through it.
        used = [d for name, d in unique.items() if name not in vfio]
        common = []
        if step.needed and self._sharing is not None:
            intended = intended_state(step)
            if not intended.empty:
                # Written ahead: a crash while the GPUs change leaves their reset to
                # unprepare (a recorded state is never less than what was applied).
                await ctx.record(
                    driver_state={**ctx.entry.driver_state, STATE_KEY: intended.to_json()}
                )
            others = self._others(ctx.claims, ref.uid)
            result = await self._sharing.prepare(ref, step, used, others=others)
            try:
                # A crash after this leaves the state for recover() and unprepare().
                await ctx.record(
                    driver_state={**ctx.entry.driver_state, STATE_KEY: result.state.to_json()}
                )
            except CheckpointError:
                # Unrecorded, the daemons and MIG devices would wait for the next recovery.
                await self._sharing.unprepare(ref.uid, result.state, others=others)
                raise
            used = list(result.devices)
            common.append(result.edits)
        devices = tuple((d.name, self._edits.device_edits(ref, d)) for d in used)
        devices += tuple(vfio.items())
        if used:
            common.insert(0, self._edits.claim_edits(ref, used))
        return ClaimEdits(devices=devices, common=tuple(c for c in common if not c.is_empty()))

    async def unprepare(self, entry: PreparedClaim, *, claims: Mapping[str, PreparedClaim]) -> None:
        """See :meth:`Driver.unprepare`: gives the claim's passthrough GPUs back to
        ``nvidia``, then deactivates its Fabric Manager partition (NVIDIA's order), undoes its
        sharing (reference-counted against the other ``claims``), then removes its host
        files."""
        if self.passthrough is not None:
            await self.passthrough.unprepare(entry, claims=claims)
        if self.partitions is not None:
            await self.partitions.unprepare(entry, claims=claims)
        if self._sharing is not None:
            await self._sharing.unprepare(
                entry.uid, self._state(entry), others=self._others(claims, entry.uid)
            )
        self._edits.release(entry.uid)

    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        """See :meth:`Driver.recover`: host files of claims not checkpointed are removed;
        GPUs left on ``vfio-pci`` or on no driver are repaired; sharing of half-prepared claims
        is undone, daemons and MIG devices no completed claim records are removed, and the MPS
        daemons completed claims record are re-adopted or restarted (this runs before the
        plugin serves, so no call finds a claim's daemon dead after a plugin restart); Fabric
        Manager partitions no entry records are deactivated, and those of completed claims
        activated again. What an entry rebuilt from its spec may use is kept. Every step runs
        even if one fails.

        Raises:
            RecoveryError: the leftovers that could not be removed (named).
        """
        failures: list[str] = []
        if self.passthrough is not None:
            try:
                await self.passthrough.recover(entries)
            except PluginError as exc:
                failures.append(str(exc))
        if self.partitions is not None:
            try:
                await self.partitions.recover(entries)
            except PluginError as exc:
                failures.append(str(exc))
        for uid in self._edits.known_claims() - set(entries):
            self._edits.release(uid)
        if self._sharing is not None:
            completed = {
                uid: self._state(e)
                for uid, e in entries.items()
                if e.state is ClaimState.PREPARE_COMPLETED
            }
            started = {
                uid: self._state(e)
                for uid, e in entries.items()
                if e.state is not ClaimState.PREPARE_COMPLETED
            }
            unknown = sorted(uid for uid, e in entries.items() if e.rebuilt)
            refs = {uid: ClaimRef(e.namespace, e.name, uid) for uid, e in entries.items()}
            try:
                await self._sharing.recover(completed, started, unknown=unknown, refs=refs)
            except PluginError as exc:
                failures.append(str(exc))
        if failures:
            raise RecoveryError("; ".join(failures))

    def _others(self, claims: Mapping[str, PreparedClaim], uid: str) -> list[ClaimSharingState]:
        """The sharing states of every checkpointed claim but ``uid``."""
        return [self._state(e) for u, e in sorted(claims.items()) if u != uid]

    def _state(self, entry: PreparedClaim) -> ClaimSharingState:
        try:
            return state_of(entry.driver_state)
        except StateDecodeError as exc:
            log.error(
                f"checkpointed sharing state unreadable: {exc}",
                extra={"event": "sharing_state_corrupt", "claim_uid": entry.uid},
            )
            return ClaimSharingState()

    def device_type(self, device: PreparedDevice) -> str:
        """``gpu`` or ``mig``; ``unknown`` for a device this node no longer publishes."""
        published = self._devices.get(device.device_name)
        return str(published.type) if published is not None else "unknown"

    def device_identity(
        self, claim: PreparedClaim, device: PreparedDevice
    ) -> DeviceIdentity | None:
        """The GPU a device is, in dcgm-exporter's labels: a MIG device by its parent GPU
        and GPU instance. A passthrough GPU (no dcgm series: vfio-pci holds it) or a device
        this node no longer publishes has none. A dynamic MIG device is the MIG device
        created for it at prepare, with the GPU instance id recorded then (none in a
        checkpoint written before it was recorded)."""
        published = self._devices.get(device.device_name)
        if published is None or published.type is DeviceType.VFIO:
            return None
        gpu = published.gpu
        if published.mig is not None:
            mig = published.mig
            return DeviceIdentity(
                uuid=gpu.uuid,
                index=str(gpu.index),
                gpu_instance_id=str(mig.gi_id),
                mig_uuid=mig.uuid,
            )
        if published.dynamic:
            created = [
                m for m in self._state(claim).created_migs if m.device_name == device.device_name
            ]
            if not created:
                return DeviceIdentity(uuid=gpu.uuid, index=str(gpu.index))
            gi_id = created[0].gi_id
            return DeviceIdentity(
                uuid=gpu.uuid,
                index=str(gpu.index),
                gpu_instance_id="" if gi_id is None else str(gi_id),
                mig_uuid=created[0].mig_uuid,
            )
        return DeviceIdentity(uuid=gpu.uuid, index=str(gpu.index))


def prepared_device_types(
    checkpoint: Checkpoint, devices: Mapping[str, NodeDevice]
) -> dict[str, int]:
    """Device type -> how many devices of completely prepared claims have it (NVIDIA's
    ``nvidia_dra_prepared_devices``); a device this node no longer publishes is ``unknown``."""

    def kind(prepared: PreparedDevice) -> str:
        device = devices.get(prepared.device_name)
        return str(device.type) if device is not None else "unknown"

    return count_prepared_devices(checkpoint, kind)
