"""A node's NVLink clique ID (``<clusterUUID>.<cliqueId>``) from its GPUs' NVML fabric info."""

from __future__ import annotations

from collections.abc import Iterable

from dra_nvlib import FabricState, GpuInfo

from .errors import CliqueIdError

__all__ = ["node_clique_id"]

_ZERO_UUID = "00000000-0000-0000-0000-000000000000"


def node_clique_id(node: str, gpus: Iterable[GpuInfo]) -> str:
    """The clique ID every fabric GPU of ``node`` reports, or ``""`` without NVLink fabric.

    As NVIDIA's strict mode (``CrashOnNVLinkFabricErrors``): GPUs without fabric info, or
    whose fabric is not supported or has a zero cluster UUID, do not count; a GPU whose fabric
    registration has not completed, or GPUs that name different cliques, are errors. A lost
    GPU does not count either: the node's other GPUs still name its clique.
    """
    ids: set[str] = set()
    for gpu in gpus:
        if gpu.lost:
            continue  # its fabric facts are the last ones seen, not the GPU's state
        fabric = gpu.fabric
        if fabric is None or fabric.state == FabricState.NOT_SUPPORTED:
            continue
        if fabric.cluster_uuid in ("", _ZERO_UUID):
            continue
        if fabric.state != FabricState.COMPLETED or fabric.status != 0:
            raise CliqueIdError(
                node,
                f"GPU {gpu.uuid}: fabric state {fabric.state.name}, status {fabric.status} "
                "(registration not completed)",
            )
        ids.add(f"{fabric.cluster_uuid}.{fabric.clique_id}")
    if len(ids) > 1:
        raise CliqueIdError(node, f"GPUs report different cliques: {', '.join(sorted(ids))}")
    return ids.pop() if ids else ""
