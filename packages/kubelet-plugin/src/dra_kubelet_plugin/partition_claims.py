"""Fabric Manager partitions of claims (gate ``FabricManagerPartitioning``), called by the GPU
driver for every claim.

As NVIDIA's driver does: before anything else of a prepare, the claim's physical GPUs (its
full and passthrough GPUs; MIG devices do not count) must be exactly the members of one
Fabric Manager partition, which is then activated (idempotent: a retried prepare meets it
active); a claim whose GPUs form no partition fails ("refusing partition activation"), so
claims ask ``matchAttribute: gpu.nvidia.com/partitionN``. Unprepare deactivates it after the
passthrough GPUs are back on ``nvidia``, unless another prepared claim uses the same
partition (GPUs shared through consumable shares).

Unlike NVIDIA's driver, which works the partition out again from the allocation, the
partition is checkpointed in the claim's ``driver_state`` before it is activated, so every
undo (unprepare, the core's undo of a failed prepare, a stale claim's cleanup) releases what
was activated even if the node's devices changed. :meth:`PartitionClaims.recover`, before the
plugin serves, deactivates the active partitions no checkpointed claim records (their claim
is gone; with the gate on this driver owns the node's partitions) and activates again those
of completely prepared claims that Fabric Manager reports inactive (Fabric Manager
restarted), unless an entry was rebuilt from its spec (its partition is unknown: nothing is
deactivated).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from dra_kubelet_core.checkpoint import ClaimState, PreparedClaim
from dra_kubelet_core.driver import PrepareContext
from dra_kubelet_core.errors import ClaimError, ClaimRef, PluginError, RecoveryError
from dra_nvlib import FabricManager, FabricManagerError, PartitionTable

from dra_kubelet_plugin.allocation import PlannedDevice
from dra_kubelet_plugin.inventory import DeviceType
from dra_kubelet_plugin.partition_attributes import PartitionAttributes, partition_attributes

__all__ = [
    "STATE_KEY",
    "PartitionActivationError",
    "PartitionClaims",
    "PartitionMismatchError",
    "PartitionReleaseError",
    "recorded_partition",
]

log = logging.getLogger(__name__)

#: The claim's ``driver_state`` key holding its partition: ``{"id": N, "modules": [...]}``.
STATE_KEY = "fabricPartition"


class PartitionMismatchError(ClaimError):
    """The claim's GPUs are not exactly one Fabric Manager partition (or a GPU has no module
    ID): NVIDIA's driver refuses the activation and the prepare."""


class PartitionActivationError(ClaimError):
    """Fabric Manager did not activate the claim's partition (in use, or unreachable); the
    retry may work once the other partition is released or Fabric Manager is back."""

    retryable = True


class PartitionReleaseError(PluginError):
    """Fabric Manager did not deactivate a claim's partition (the kubelet retries)."""

    def __init__(self, partition: int, claim_uid: str, cause: Exception) -> None:
        super().__init__(
            f"claim {claim_uid}: deactivating Fabric Manager partition {partition}: {cause}"
        )
        self.partition = partition
        self.claim_uid = claim_uid


def recorded_partition(entry: PreparedClaim) -> int | None:
    """The partition the claim's checkpoint entry records (``None``: none)."""
    state = entry.driver_state.get(STATE_KEY)
    if isinstance(state, dict) and isinstance(state.get("id"), int):
        return int(state["id"])
    return None


class PartitionClaims:
    """Activates, deactivates and recovers the Fabric Manager partitions of claims."""

    def __init__(self, manager: FabricManager) -> None:
        """Read Fabric Manager's partitions once, as NVIDIA's driver does at start.

        Raises:
            FabricManagerError: Fabric Manager unreachable, or its partition list malformed.
        """
        self._fm = manager
        partitions = manager.partitions()
        self._table = PartitionTable(partitions)
        self.attributes: PartitionAttributes = partition_attributes(partitions)

    # ------------------------------------------------------------------ prepare
    async def prepare(
        self, ref: ClaimRef, planned: Sequence[PlannedDevice], ctx: PrepareContext
    ) -> None:
        """Activate the partition of the claim's physical GPUs (none: nothing to do).

        Raises:
            PartitionMismatchError: the GPUs form no partition (or one has no module ID).
            PartitionActivationError: Fabric Manager refused or cannot be reached.
        """
        gpus = {
            p.device.gpu.uuid: p.device.gpu
            for p in planned
            if p.device.type in (DeviceType.GPU, DeviceType.VFIO)
        }
        if not gpus:
            return
        unresolved = sorted(g.pci_bus_id for g in gpus.values() if g.module_id is None)
        if unresolved:
            raise PartitionMismatchError(
                ref,
                f"no GPU module ID for GPU at PCI {unresolved[0]}; refusing partition activation",
            )
        modules = sorted(g.module_id for g in gpus.values() if g.module_id is not None)
        partition = self._table.find(modules)
        if partition is None:
            raise PartitionMismatchError(
                ref,
                f"GPU module set {modules} does not match any Fabric Manager partition; "
                "refusing partition activation (constrain the claim with matchAttribute "
                "gpu.nvidia.com/partitionN)",
            )
        # Recorded ahead: a crash or failure from here on leaves the release to the undo.
        await ctx.record(
            driver_state={
                **ctx.entry.driver_state,
                STATE_KEY: {"id": partition, "modules": modules},
            }
        )
        try:
            changed = await asyncio.to_thread(self._fm.activate, partition)
        except FabricManagerError as exc:
            raise PartitionActivationError(
                ref, f"activating Fabric Manager partition {partition}: {exc}"
            ) from exc
        log.info(
            "Fabric Manager partition activated" if changed else "partition already active",
            extra={
                "event": "fabric_partition_activated",
                "claim_uid": ref.uid,
                "partition": partition,
                "gpu_modules": modules,
            },
        )

    # ------------------------------------------------------------------ unprepare
    async def unprepare(self, entry: PreparedClaim, *, claims: Mapping[str, PreparedClaim]) -> None:
        """Deactivate the entry's partition unless another of ``claims`` uses it
        (idempotent).

        Raises:
            PartitionReleaseError: Fabric Manager refused or cannot be reached.
        """
        partition = recorded_partition(entry)
        if partition is None:
            return
        others = sorted(
            uid
            for uid, e in claims.items()
            if uid != entry.uid and recorded_partition(e) == partition
        )
        if others:
            log.info(
                "partition still used by other claims; not deactivated",
                extra={"event": "fabric_partition_kept", "partition": partition, "claims": others},
            )
            return
        if partition not in self._table:
            # Fabric Manager no longer lists it (reconfigured): nothing of ours to release.
            log.warning(
                "recorded partition unknown to Fabric Manager; nothing to deactivate",
                extra={"event": "fabric_partition_unknown", "partition": partition},
            )
            return
        try:
            await asyncio.to_thread(self._fm.deactivate, partition)
        except FabricManagerError as exc:
            raise PartitionReleaseError(partition, entry.uid, exc) from exc
        log.info(
            "Fabric Manager partition deactivated",
            extra={
                "event": "fabric_partition_deactivated",
                "claim_uid": entry.uid,
                "partition": partition,
            },
        )

    # ------------------------------------------------------------------ recover
    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        """Deactivate partitions no entry records; activate again those of completed
        entries that are inactive. Nothing is deactivated while an entry was rebuilt.

        Raises:
            RecoveryError: what Fabric Manager refused (named; the rest was done).
        """
        recorded = {p for e in entries.values() if (p := recorded_partition(e)) is not None}
        completed = sorted(
            {
                p
                for e in entries.values()
                if e.state is ClaimState.PREPARE_COMPLETED
                and (p := recorded_partition(e)) is not None
            }
        )
        try:
            partitions = await asyncio.to_thread(self._fm.partitions)
        except FabricManagerError as exc:
            raise RecoveryError(f"Fabric Manager partitions: {exc}") from exc
        active = {p.id for p in partitions if p.active}
        failures: list[str] = []
        if not any(e.rebuilt for e in entries.values()):
            for partition in sorted(active - recorded):
                failures += await self._change(partition, activate=False)
        for partition in completed:
            if partition not in active and partition in self._table:
                failures += await self._change(partition, activate=True)
        if failures:
            raise RecoveryError("; ".join(failures))

    async def _change(self, partition: int, *, activate: bool) -> list[str]:
        call = self._fm.activate if activate else self._fm.deactivate
        try:
            await asyncio.to_thread(call, partition)
        except FabricManagerError as exc:
            return [str(exc)]
        log.warning(
            "partition of a prepared claim activated again at recovery"
            if activate
            else "partition of no prepared claim deactivated at recovery",
            extra={
                "event": "fabric_partition_recovered",
                "partition": partition,
                "active": activate,
            },
        )
        return []
