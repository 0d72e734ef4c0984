"""The node's allocatable devices, derived from the device layer's facts (pure).

Full GPUs are named ``gpu-<minor>``; static MIG devices (already created on a MIG-enabled
GPU) ``gpu-<minor>-mig-<profile>-<giProfileId>-<placementStart>``, and a MIG-enabled parent
is not offered as a whole GPU. A GPU instance split into several compute instances yields one
device per compute instance, named with a ``-ci<ciId>`` suffix (see :func:`mig_device_name`).
Device order is deterministic: by GPU minor, then MIG placement and compute instance, so
slices and their generation only change when the hardware does.

With passthrough (gate ``PassthroughSupport``) every GPU that is not in MIG mode is offered a
second time, as ``gpu-vfio-<M>`` (type ``vfio``, ``M`` its index in PCI enumeration order):
the same silicon, so :func:`hidden_siblings` names the twin to take out of the slice while
one of them is prepared.

With dynamic MIG (``build_inventory(gpus, dynamic_mig=True)``) every MIG-capable GPU is
published as a full GPU plus one device per valid MIG placement (created at prepare, see
:mod:`dra_sharing.partitionable`), whatever MIG devices exist at the moment; GPUs that
cannot do MIG are published as full GPUs only.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from dra_nvlib import Brand, GpuInfo, MigDevice, MigProfile, PciFacts
from dra_sharing import dynamic_mig_device_name, mig_offers, partitionable

__all__ = [
    "DeviceType",
    "NodeDevice",
    "brand_name",
    "build_inventory",
    "build_vfio_devices",
    "hidden_siblings",
    "mig_device_name",
    "vfio_uuid",
]

# uuid5 namespace of passthrough device UUIDs: a stable UUID per PCI address.
_VFIO_NAMESPACE = uuid.UUID("3f3c52a4-0c3e-4f8a-9a43-6c0f0b8d1e57")


class DeviceType(StrEnum):
    """Value of the ``type`` attribute."""

    GPU = "gpu"
    MIG = "mig"
    VFIO = "vfio"


@dataclass(frozen=True)
class NodeDevice:
    """A device this node publishes: a full GPU, a static MIG device on ``gpu``, (dynamic
    MIG) a MIG placement ``placement_start`` of ``profile`` that is created at prepare, or a
    passthrough GPU (``pci`` holds its PCI facts).

    ``partitionable`` marks the devices of a GPU published with counters (dynamic MIG): its
    full GPU and its placements.
    """

    name: str
    type: DeviceType
    gpu: GpuInfo
    mig: MigDevice | None = None
    profile: MigProfile | None = None
    placement_start: int | None = None
    partitionable: bool = False
    pci: PciFacts | None = None
    iommufd: bool = False

    @property
    def dynamic(self) -> bool:
        """True for a MIG placement that exists only once prepared."""
        return self.type is DeviceType.MIG and self.mig is None and self.placement_start is not None

    @property
    def uuid(self) -> str:
        """The device's own UUID (``GPU-...``, ``MIG-...``, or the PCI-derived vfio UUID);
        empty for a dynamic placement."""
        if self.type is DeviceType.VFIO:
            return vfio_uuid(self.gpu.pci_bus_id)
        if self.mig is not None:
            return self.mig.uuid
        return "" if self.dynamic else self.gpu.uuid

    @property
    def memory_bytes(self) -> int | None:
        """Memory usable through this device; ``None`` where NVML does not report it
        (unified-memory GPUs)."""
        if self.mig is not None:
            return self.mig.memory_bytes
        if self.dynamic and self.profile is not None:
            return self.profile.memory_bytes
        return self.gpu.memory_bytes


_BRANDS: Mapping[Brand, str] = {
    Brand.UNKNOWN: "Unknown",
    Brand.QUADRO: "Quadro",
    Brand.TESLA: "Tesla",
    Brand.NVS: "NVS",
    Brand.GRID: "Grid",
    Brand.GEFORCE: "GeForce",
    Brand.TITAN: "Titan",
    Brand.NVIDIA_VAPPS: "NvidiaVApps",
    Brand.NVIDIA_VPC: "NvidiaVPC",
    Brand.NVIDIA_VCS: "NvidiaVCS",
    Brand.NVIDIA_VWS: "NvidiaVWS",
    Brand.NVIDIA_CLOUD_GAMING: "NvidiaCloudGaming",
    Brand.QUADRO_RTX: "QuadroRTX",
    Brand.NVIDIA_RTX: "NvidiaRTX",
    Brand.NVIDIA: "Nvidia",
    Brand.GEFORCE_RTX: "GeForceRTX",
    Brand.TITAN_RTX: "TitanRTX",
}


def brand_name(brand: Brand) -> str:
    """The brand as published (``Nvidia``, ``Tesla``, ...), as the seed walkthrough shows."""
    return _BRANDS.get(brand, "Unknown")


def mig_device_name(gpu: GpuInfo, mig: MigDevice) -> str:
    """``gpu-<minor>-mig-<profile>-<giProfileId>-<placementStart>``, a valid DNS label.

    The profile name loses its dots and turns other separators into dashes
    (``1g.10gb+me`` becomes ``1g10gb-me``). The placement identifies the GPU instance; when
    that instance holds several compute instances (``gpu.mig_devices`` lists one entry per
    compute instance), every one of them gets ``-ci<ciId>`` appended, so their names differ
    and do not depend on enumeration order. The common single compute instance keeps the
    plain name, the one published before compute instances were told apart, so existing
    slices and checkpoints keep their device names.
    """
    name = dynamic_mig_device_name(gpu.minor, mig.profile_name, mig.profile_id, mig.placement.start)
    siblings = sum(1 for other in gpu.mig_devices if other.gi_id == mig.gi_id)
    if siblings > 1:
        name += f"-ci{mig.ci_id}"
    return name


def build_inventory(gpus: Iterable[GpuInfo], *, dynamic_mig: bool = False) -> list[NodeDevice]:
    """All devices to publish, in deterministic order. Lost GPUs are still listed (tainted)."""
    devices: list[NodeDevice] = []
    for gpu in sorted(gpus, key=lambda g: g.minor):
        if dynamic_mig and partitionable(gpu):
            devices.append(
                NodeDevice(
                    name=f"gpu-{gpu.minor}", type=DeviceType.GPU, gpu=gpu, partitionable=True
                )
            )
            devices.extend(
                NodeDevice(
                    name=offer.name,
                    type=DeviceType.MIG,
                    gpu=gpu,
                    profile=offer.profile,
                    placement_start=offer.start,
                    partitionable=True,
                )
                for offer in mig_offers(gpu)
            )
        elif gpu.mig_mode.current:
            for mig in sorted(gpu.mig_devices, key=lambda m: (m.placement.start, m.gi_id, m.ci_id)):
                profile = next(
                    (p for p in gpu.mig_profiles if p.profile_id == mig.profile_id), None
                )
                devices.append(
                    NodeDevice(
                        name=mig_device_name(gpu, mig),
                        type=DeviceType.MIG,
                        gpu=gpu,
                        mig=mig,
                        profile=profile,
                    )
                )
        else:
            devices.append(NodeDevice(name=f"gpu-{gpu.minor}", type=DeviceType.GPU, gpu=gpu))
    return devices


def vfio_uuid(pci_bus_id: str) -> str:
    """The ``uuid`` attribute of a passthrough device: SHA-1 namespaced on its PCI address,
    as NVIDIA's driver derives it (a GPU on ``vfio-pci`` has no NVML UUID)."""
    return str(uuid.uuid5(_VFIO_NAMESPACE, pci_bus_id))


def build_vfio_devices(
    gpus: Iterable[GpuInfo], pci: Sequence[PciFacts], *, iommufd: bool
) -> list[NodeDevice]:
    """``gpu-vfio-<M>`` for every GPU of ``pci`` (PCI enumeration order) that NVML reports
    without MIG mode; a MIG-enabled GPU is only offered as its MIG devices. ``iommufd``:
    the node has ``/dev/iommu``."""
    by_bus = {g.pci_bus_id: g for g in gpus}
    devices: list[NodeDevice] = []
    for index, facts in enumerate(sorted(pci, key=lambda f: f.bus_id)):
        gpu = by_bus.get(facts.bus_id)
        if gpu is None or gpu.mig_mode.current:
            continue
        devices.append(
            NodeDevice(
                name=f"gpu-vfio-{index}",
                type=DeviceType.VFIO,
                gpu=gpu,
                pci=facts,
                iommufd=iommufd,
            )
        )
    return devices


def hidden_siblings(devices: Iterable[NodeDevice], prepared: Collection[str]) -> set[str]:
    """Names of the devices to leave out of the slice because their twin (``gpu-N`` of
    ``gpu-vfio-M`` or the reverse: one GPU) is prepared."""
    by_bus: dict[str, list[NodeDevice]] = {}
    for device in devices:
        if device.type in (DeviceType.GPU, DeviceType.VFIO):
            by_bus.setdefault(device.gpu.pci_bus_id, []).append(device)
    hidden: set[str] = set()
    for twins in by_bus.values():
        if len(twins) < 2:
            continue
        names = {d.name for d in twins}
        if names & set(prepared):
            hidden |= names - set(prepared)
    return hidden


def unpublished_gpus(
    gpus: Iterable[GpuInfo], devices: Sequence[NodeDevice], *, dynamic_mig: bool, taints: bool
) -> list[str]:
    """Why each GPU that yields no published device yields none (one line per GPU; a node
    without GPUs gets one line too), so that an empty device list explains itself."""
    listed = {d.gpu.uuid for d in devices}
    gpus = sorted(gpus, key=lambda g: g.minor)
    if not gpus:
        return ["the node has no GPUs"]
    out: list[str] = []
    for gpu in gpus:
        if gpu.uuid in listed:
            continue
        what = f"GPU gpu-{gpu.minor} ({gpu.product_name})"
        if gpu.lost and not taints:
            out.append(
                f"{what} is lost: its devices are published (tainted) only with gate DeviceTaints"
            )
        elif gpu.mig_mode.current and not dynamic_mig:
            # The smallest profile, as many as fit: a layout that always places.
            small = min(gpu.mig_profiles, key=lambda p: p.slice_count, default=None)
            layout = f"mig={small.instance_count}x{small.name}" if small else "mig=LAYOUT"
            out.append(
                f"{what} is in MIG mode without MIG devices, and a GPU in MIG mode is not "
                f"offered whole: create MIG devices (fake fleets: a layout, e.g. "
                f"'{layout}') or turn on gate DynamicMIG"
            )
        else:
            out.append(f"{what} yields no device")
    return out
