"""The Fabric Manager attributes of a GPU (gate ``FabricManagerPartitioning``; pure).

As NVIDIA's driver publishes them on full GPUs (``type=gpu``) and passthrough GPUs
(``type=vfio``), not on MIG devices: ``gpuModuleID`` (the GPU's baseboard module, from
``nvmlDeviceGetModuleId``) and, for every Fabric Manager partition holding the GPU,
``partition<N>`` = the id of its partition of ``N`` GPUs. A claim that wants the GPUs of one
partition asks ``matchAttribute: gpu.nvidia.com/partition2`` (NVIDIA's demo spec), and the
prepare then activates that partition. With the gate on and no Fabric Manager on the node
(no NVSwitch fabric) only ``gpuModuleID`` is published, as NVIDIA does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dra_nvlib import FabricPartition, GpuInfo, PartitionTable

__all__ = ["PartitionAttributes", "partition_attributes"]


@dataclass(frozen=True)
class PartitionAttributes:
    """Module ID -> partition size -> partition id, read from Fabric Manager at start."""

    by_module: Mapping[int, Mapping[int, int]] = field(default_factory=dict)

    def of(self, gpu: GpuInfo) -> dict[str, object]:
        """The slice attributes of ``gpu`` (none when NVML reports no module)."""
        if gpu.module_id is None:
            return {}
        attrs: dict[str, object] = {"gpuModuleID": {"int": gpu.module_id}}
        for size, partition in sorted(self.by_module.get(gpu.module_id, {}).items()):
            attrs[f"partition{size}"] = {"int": partition}
        return attrs


def partition_attributes(partitions: tuple[FabricPartition, ...]) -> PartitionAttributes:
    """The attributes of every module Fabric Manager lists.

    Raises:
        FabricManagerError: a malformed list, or a GPU in two partitions of one size (NVIDIA
            refuses to start on both).
    """
    table = PartitionTable(partitions)
    modules = sorted({m for p in partitions for m in p.module_ids})
    return PartitionAttributes({m: table.by_size(m) for m in modules})
