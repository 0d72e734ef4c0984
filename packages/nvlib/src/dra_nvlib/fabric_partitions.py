"""Fabric Manager (NVSwitch) partitions: the table, and the manager face the GPU plugin uses.

NVIDIA's ``FabricManagerPartitioning`` reads the partitions Fabric Manager supports once,
publishes for each GPU the partition of each size it belongs to (``partitionN``), activates
at prepare the partition whose members are exactly a claim's GPUs, and deactivates it at
unprepare. Members are GPU module IDs (``nvmlDeviceGetModuleId``). Activation and
deactivation are idempotent: a retried prepare meets an active partition and does nothing.

:class:`PartitionTable` is pure; :class:`FabricManager` is the boundary, implemented by
:class:`~dra_nvlib.fake_fabric_manager.FakeFabricManager`. The real Fabric Manager is
reached through ``libnvfm.so`` (NVIDIA uses go-nvfm); no Python binding is built yet.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from dra_nvlib.errors import FabricManagerError

__all__ = ["FabricManager", "FabricPartition", "PartitionTable", "hgx_partitions"]


@dataclass(frozen=True)
class FabricPartition:
    """One partition Fabric Manager supports: its id, whether active, its GPU module IDs."""

    id: int
    active: bool
    module_ids: tuple[int, ...]


class PartitionTable:
    """The supported partitions, checked as NVIDIA checks them (pure).

    Raises:
        FabricManagerError: a duplicate partition id, an empty partition, or a module ID
            listed twice in one partition.
    """

    def __init__(self, partitions: Iterable[FabricPartition]) -> None:
        by_id: dict[int, FabricPartition] = {}
        for p in partitions:
            if p.id in by_id:
                raise FabricManagerError(p.id, "list", "listed twice")
            if not p.module_ids:
                raise FabricManagerError(p.id, "list", "has no GPUs")
            if len(set(p.module_ids)) != len(p.module_ids):
                raise FabricManagerError(p.id, "list", "lists a GPU module ID twice")
            by_id[p.id] = p
        self._by_id: Mapping[int, FabricPartition] = by_id

    def __contains__(self, partition_id: object) -> bool:
        return partition_id in self._by_id

    def by_size(self, module_id: int) -> dict[int, int]:
        """For the GPU ``module_id``: partition size -> id of its partition of that size.

        Raises:
            FabricManagerError: the GPU is in two partitions of one size.
        """
        out: dict[int, int] = {}
        for p in sorted(self._by_id.values(), key=lambda p: p.id):
            if module_id not in p.module_ids:
                continue
            size = len(p.module_ids)
            if size in out:
                raise FabricManagerError(
                    p.id,
                    "list",
                    f"GPU module {module_id} is also in partition {out[size]} of size {size}",
                )
            out[size] = p.id
        return out

    def find(self, module_ids: Iterable[int]) -> int | None:
        """The partition whose members are exactly ``module_ids``, or ``None``."""
        wanted = frozenset(module_ids)
        for p in sorted(self._by_id.values(), key=lambda p: p.id):
            if wanted and frozenset(p.module_ids) == wanted:
                return p.id
        return None


def hgx_partitions(gpu_count: int) -> tuple[FabricPartition, ...]:
    """The partitions of an HGX baseboard's default layout: one of every GPU, then halves,
    down to single GPUs (for 8 GPUs: ids 0; 1-2; 3-6; 7-14), module IDs from 1."""
    if gpu_count < 1 or gpu_count & (gpu_count - 1):
        raise ValueError(f"an HGX layout needs a power-of-two GPU count, not {gpu_count}")
    out: list[FabricPartition] = []
    size = gpu_count
    while size >= 1:
        for start in range(0, gpu_count, size):
            members = tuple(range(start + 1, start + size + 1))
            out.append(FabricPartition(id=len(out), active=False, module_ids=members))
        size //= 2
    return tuple(out)


class FabricManager(abc.ABC):
    """A connection to Fabric Manager (FM's ``fmGetSupportedFabricPartitions``,
    ``fmActivateFabricPartition``, ``fmDeactivateFabricPartition``)."""

    @abc.abstractmethod
    def partitions(self) -> tuple[FabricPartition, ...]:
        """Every supported partition with its current activation."""

    @abc.abstractmethod
    def _activate(self, partition_id: int) -> None: ...

    @abc.abstractmethod
    def _deactivate(self, partition_id: int) -> None: ...

    def table(self) -> PartitionTable:
        """The checked partition table (see :class:`PartitionTable`)."""
        return PartitionTable(self.partitions())

    def _active(self, partition_id: int) -> bool:
        for p in self.partitions():
            if p.id == partition_id:
                return p.active
        raise FabricManagerError(partition_id, "lookup", "unknown partition")

    def activate(self, partition_id: int) -> bool:
        """Activate (idempotent); True when this call changed it.

        Raises:
            FabricManagerError: unknown partition, or Fabric Manager refused (e.g. in use).
        """
        if self._active(partition_id):
            return False
        self._activate(partition_id)
        return True

    def deactivate(self, partition_id: int) -> bool:
        """Deactivate (idempotent); True when this call changed it.

        Raises:
            FabricManagerError: unknown partition, or Fabric Manager refused.
        """
        if not self._active(partition_id):
            return False
        self._deactivate(partition_id)
        return True
