"""The CDI edits of a passthrough GPU (pure): its VFIO device nodes, chosen by the claim's
``VfioDeviceConfig``.

``iommu.backendPolicy``: ``LegacyOnly`` gives the group node ``/dev/vfio/<group>``;
``PreferIommuFD`` gives the iommufd character device ``/dev/vfio/devices/vfioN`` when the node
has ``/dev/iommu`` and the kernel made one for the GPU, else the group node.
``iommu.enableAPIDevice`` adds the API node of that backend: ``/dev/vfio/vfio`` (legacy) or
``/dev/iommu`` (iommufd). ``NVIDIA_VISIBLE_DEVICES=void`` keeps a legacy NVIDIA runtime hook
from injecting GPUs: a VM launcher gets the raw PCI function, not a CUDA device.
"""

from __future__ import annotations

from dataclasses import dataclass

from dra_api_types import VfioDeviceConfig
from dra_api_types.nvidia_v1beta1 import IOMMU_BACKEND_POLICIES
from dra_kubelet_core.cdi import ContainerEdits
from dra_kubelet_core.host_devices import HostDevices
from dra_nvlib import PciFacts

__all__ = [
    "LEGACY_ONLY",
    "PREFER_IOMMUFD",
    "VfioNodes",
    "iommu_settings",
    "vfio_container_edits",
    "vfio_nodes",
]

LEGACY_ONLY = "LegacyOnly"
PREFER_IOMMUFD = "PreferIommuFD"


@dataclass(frozen=True)
class VfioNodes:
    """The device nodes a passthrough GPU is used through, and which backend they belong to."""

    backend: str  # "legacy" or "iommufd"
    device: str  # /dev/vfio/<group> or /dev/vfio/devices/vfioN
    api: str | None  # /dev/vfio/vfio or /dev/iommu, when enableAPIDevice


def iommu_settings(config: VfioDeviceConfig | None) -> tuple[str, bool]:
    """``(backendPolicy, enableAPIDevice)`` after NVIDIA's defaults.

    Raises:
        ValueError: an unknown ``iommu.backendPolicy`` (the message names the field).
    """
    normalized = (config or VfioDeviceConfig()).normalize()
    iommu = normalized.iommu
    assert iommu is not None  # normalize() fills it
    policy = iommu.backend_policy
    if policy not in IOMMU_BACKEND_POLICIES:
        raise ValueError(
            f"iommu.backendPolicy {policy!r} is not one of {', '.join(IOMMU_BACKEND_POLICIES)}"
        )
    return policy, bool(iommu.enable_api_device)


def vfio_nodes(
    facts: PciFacts, config: VfioDeviceConfig | None, *, iommufd_available: bool
) -> VfioNodes:
    """Pick the nodes for a GPU bound to ``vfio-pci`` (``facts`` read after the bind).

    Raises:
        ValueError: an unknown ``iommu.backendPolicy`` (the message names the field), or a
            GPU without IOMMU group.
    """
    policy, api = iommu_settings(config)
    if facts.iommu_group is None:
        raise ValueError(f"GPU {facts.bus_id} has no IOMMU group")
    if policy == PREFER_IOMMUFD and iommufd_available and facts.vfio_device is not None:
        return VfioNodes(
            backend="iommufd",
            device=f"/dev/vfio/devices/{facts.vfio_device}",
            api="/dev/iommu" if api else None,
        )
    return VfioNodes(
        backend="legacy",
        device=f"/dev/vfio/{facts.iommu_group}",
        api="/dev/vfio/vfio" if api else None,
    )


def vfio_container_edits(nodes: VfioNodes, host: HostDevices) -> ContainerEdits:
    """The device's CDI edits, each node as ``host`` backs it (the host's own, or the fake
    backend's stand-ins)."""
    paths = [nodes.device] + ([nodes.api] if nodes.api else [])
    return ContainerEdits(
        env=("NVIDIA_VISIBLE_DEVICES=void",),
        device_nodes=tuple(host.node(p) for p in paths),
    )
