"""A node's NVLink clique ID (``<clusterUUID>.<cliqueId>``) from its GPUs' NVML fabric info.

Two readings, as NVIDIA's compute-domain plugin has, chosen by ``CrashOnNVLinkFabricErrors``:

- strict (the gate on, NVIDIA's default): a fabric that is supported but not registered, or
  registered with an error, stops the plugin (:class:`CliqueIdError`); only an unsupported
  fabric or a zero cluster UUID (NVLink but not multi-node NVLink) means "no clique". With
  ``FabricManagerPartitioning`` on a single-node NVSwitch system, an unfinished registration
  is normal (GPUs register when their Fabric Manager partition is activated) and is skipped.
- lenient (the gate off): a GPU whose fabric is not attached (not registered, registration
  error, zero cluster UUID) does not count, and the node falls back to "no clique".

In both, GPUs that name different cliques are an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dra_nvlib import FabricInfo, FabricState, GpuInfo

from .errors import CliqueIdError

__all__ = ["FabricPolicy", "node_clique_id"]

_ZERO_UUID = "00000000-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class FabricPolicy:
    """How fabric errors are read (from the feature gates, once at start)."""

    #: ``CrashOnNVLinkFabricErrors``: refuse to start on a fabric error instead of falling back
    crash_on_errors: bool = True
    #: ``FabricManagerPartitioning`` and the node has an NVSwitch fabric: an unfinished
    #: registration waits for a partition, it is not an error
    pending_partition: bool = False


def _zero(fabric: FabricInfo) -> bool:
    return fabric.cluster_uuid in ("", _ZERO_UUID)


def _strict(node: str, gpu: GpuInfo, fabric: FabricInfo, policy: FabricPolicy) -> bool:
    """Whether the GPU counts; raises on a fabric error (NVIDIA's order of checks)."""
    if fabric.state != FabricState.COMPLETED:
        if policy.pending_partition:
            return False
        raise CliqueIdError(
            node,
            f"GPU {gpu.uuid}: NVLink fabric not attached: state {fabric.state.name} "
            "(registration not completed), refusing to start",
        )
    if fabric.status != 0:
        raise CliqueIdError(
            node,
            f"GPU {gpu.uuid}: NVLink fabric registration error: status {fabric.status}, "
            "refusing to start",
        )
    return not _zero(fabric)


def _attached(fabric: FabricInfo) -> bool:
    """go-nvlib's ``IsFabricAttached``: registered, without error, in a cluster."""
    return fabric.state == FabricState.COMPLETED and fabric.status == 0 and not _zero(fabric)


def node_clique_id(node: str, gpus: Iterable[GpuInfo], policy: FabricPolicy | None = None) -> str:
    """The clique ID every fabric GPU of ``node`` reports, or ``""`` without NVLink fabric.

    GPUs without fabric info or whose fabric is not supported never count. A lost GPU does
    not count either: its fabric facts are the last ones seen, and the node's other GPUs
    still name its clique.

    Raises:
        CliqueIdError: GPUs name different cliques, or (strict policy) a fabric error.
    """
    policy = policy or FabricPolicy()
    ids: set[str] = set()
    for gpu in gpus:
        fabric = gpu.fabric
        if gpu.lost or fabric is None or fabric.state == FabricState.NOT_SUPPORTED:
            continue
        counts = _strict(node, gpu, fabric, policy) if policy.crash_on_errors else _attached(fabric)
        if counts:
            ids.add(f"{fabric.cluster_uuid}.{fabric.clique_id}")
    if len(ids) > 1:
        raise CliqueIdError(node, f"GPUs report different cliques: {', '.join(sorted(ids))}")
    return ids.pop() if ids else ""
