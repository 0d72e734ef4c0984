"""The ResourceSlices this node publishes, as ``resource.k8s.io/v1`` JSON (pure).

One pool named after the node, owned by the Node; devices in inventory order, split into
slices of at most 128 devices (64 when taints are present, the API's limit); every slice
carries the pool's generation and ``resourceSliceCount``.

:class:`SlicePublication` adds the sharing forms (see :mod:`dra_sharing`): consumable shares
(``allowMultipleAllocations`` and request policies on every device) and dynamic MIG (one
counter set per partitionable GPU, placements and the full GPU consuming its counters;
counter sets in a slice of their own on Kubernetes 1.35+, next to their GPU's devices on
1.34, one device slice per GPU). With NVIDIA's ``DRAListTypeAttributes`` gate the standard
``resource.kubernetes.io/numaNode`` is published in its list form (``ints: [n]``), as NVIDIA
publishes it (KEP-5491/6072); a slice holding list attributes takes at most 64 devices, the
API's limit for such slices.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_kubelet_core.health import DeviceHealth, HealthHub
from dra_kubelet_core.publisher import SliceSource
from dra_sharing import (
    ConsumableShares,
    MigOffer,
    counter_set_json,
    full_gpu_capacity,
    full_gpu_consumption,
    split_layout,
)

from dra_kubelet_plugin.device_taints import TAINT_GPU_LOST, TAINT_UNMONITORED
from dra_kubelet_plugin.inventory import DeviceType, NodeDevice, brand_name
from dra_kubelet_plugin.partition_attributes import PartitionAttributes

__all__ = [
    "MAX_DEVICES_PER_SLICE",
    "MAX_DEVICES_PER_SLICE_WITH_TAINTS",
    "NUMA_NODE_ATTRIBUTE",
    "SlicePublication",
    "SliceSpec",
    "binary_quantity",
    "build_resource_slices",
    "device_json",
    "gpu_slice_source",
    "semver_of",
]

MAX_DEVICES_PER_SLICE = 128
#: The API's limit for a slice whose devices carry taints, counters or list attributes.
MAX_DEVICES_PER_SLICE_WITH_TAINTS = 64
NUMA_NODE_ATTRIBUTE = "resource.kubernetes.io/numaNode"
# A lost GPU evicts its pods; an unmonitored one only informs (NVIDIA's effect ``None``);
# every other health taint keeps new pods away.
_TAINT_EFFECTS: dict[str | None, str] = {TAINT_GPU_LOST: "NoExecute", TAINT_UNMONITORED: "None"}
_BINARY_SUFFIXES: tuple[tuple[str, int], ...] = tuple(
    (suffix, 1 << (10 * power))
    for suffix, power in (("Ei", 6), ("Pi", 5), ("Ti", 4), ("Gi", 3), ("Mi", 2), ("Ki", 1))
)


@dataclass(frozen=True)
class SliceSpec:
    """Inputs of the slice builder that are not devices."""

    driver_name: str
    node_name: str
    node_uid: str | None = None


@dataclass(frozen=True)
class SlicePublication:
    """How devices are shared: consumable shares, and where counter sets go (dynamic MIG)."""

    consumable: ConsumableShares = field(default_factory=ConsumableShares)
    #: Kubernetes 1.35+: counter sets in their own slice (NVIDIA's split layout).
    split_counters: bool = True
    #: NVIDIA's ``DRAListTypeAttributes``: list-valued attributes where NVIDIA publishes them
    #: (the cluster needs the Kubernetes gate of the same name).
    list_attributes: bool = False
    #: NVIDIA's ``FabricManagerPartitioning``: ``gpuModuleID`` and ``partitionN`` on full and
    #: passthrough GPUs (``None``: gate off).
    partitions: PartitionAttributes | None = None


def binary_quantity(n_bytes: int) -> str:
    """Canonical Kubernetes binary-SI quantity of a byte count (``80Gi``, ``189471Mi``)."""
    if n_bytes == 0:
        return "0"
    for suffix, unit in _BINARY_SUFFIXES:
        if n_bytes % unit == 0:
            return f"{n_bytes // unit}{suffix}"
    return str(n_bytes)


def semver_of(text: str) -> str:
    """Normalize a driver/CUDA version to semver: pad to three parts, drop leading zeros.

    ``"9.0"`` becomes ``"9.0.0"`` and ``"535.104.05"`` becomes ``"535.104.5"``.
    """
    core = re.match(r"^\d+(?:\.\d+){0,2}", text.strip())
    if core is None:
        raise ValueError(f"version {text!r} does not start with a number")
    parts = [str(int(p)) for p in core.group(0).split(".")]
    parts += ["0"] * (3 - len(parts))
    return ".".join(parts)


def _str(value: str) -> dict[str, object]:
    return {"string": value}


def _ver(value: str) -> dict[str, object]:
    return {"version": semver_of(value)}


def _numa_node(value: int, *, as_list: bool) -> dict[str, object]:
    # NVIDIA publishes the physical node as a one-element list with the gate on, until it
    # computes the same-socket nodes at minimum distance (KEP-6072's preferred form).
    return {"ints": [value]} if as_list else {"int": value}


def _vfio_json(
    device: NodeDevice, *, list_attributes: bool, partitions: PartitionAttributes | None
) -> tuple[dict[str, object], dict[str, object]]:
    """Attributes and capacity of a passthrough GPU (NVIDIA's ``type=vfio`` device)."""
    gpu, pci = device.gpu, device.pci
    attrs: dict[str, object] = {
        "type": _str(DeviceType.VFIO.value),
        "uuid": _str(device.uuid),
        "productName": _str(gpu.product_name),
        "resource.kubernetes.io/pciBusID": _str(gpu.pci_bus_id),
    }
    if pci is not None:
        attrs["vendorID"] = _str(f"0x{pci.vendor_id}")
        attrs["deviceID"] = _str(f"0x{pci.device_id}")
    attrs["iommuFDEnabled"] = {"bool": device.iommufd}
    if gpu.pcie_root:
        attrs["resource.kubernetes.io/pcieRoot"] = _str(gpu.pcie_root)
    if gpu.numa_node is not None:
        attrs[NUMA_NODE_ATTRIBUTE] = _numa_node(gpu.numa_node, as_list=list_attributes)
    if partitions is not None:
        attrs.update(partitions.of(gpu))
    capacity: dict[str, object] = {}
    if gpu.memory_bytes is not None:
        capacity["addressableMemory"] = {"value": binary_quantity(gpu.memory_bytes)}
    return attrs, capacity


def device_json(
    device: NodeDevice,
    health: DeviceHealth | None = None,
    *,
    consumable: ConsumableShares | None = None,
    list_attributes: bool = False,
    partitions: PartitionAttributes | None = None,
) -> dict[str, object]:
    """One ``Device`` of the slice, with the attributes and capacity the driver publishes
    (``list_attributes``: NVIDIA's ``DRAListTypeAttributes`` forms; ``partitions``: its
    ``FabricManagerPartitioning`` attributes)."""
    if device.type is DeviceType.VFIO:
        vfio_attrs, vfio_capacity = _vfio_json(
            device, list_attributes=list_attributes, partitions=partitions
        )
        vfio: dict[str, object] = {
            "name": device.name,
            "attributes": dict(sorted(vfio_attrs.items())),
        }
        if vfio_capacity:
            vfio["capacity"] = dict(sorted(vfio_capacity.items()))
        return _with_taint(vfio, health)
    gpu = device.gpu
    attrs: dict[str, object] = {
        "type": _str(device.type.value),
        "productName": _str(gpu.product_name),
        "brand": _str(brand_name(gpu.brand)),
        "architecture": _str(gpu.architecture.display_name),
        "cudaComputeCapability": _ver(str(gpu.cuda_compute_capability)),
        "driverVersion": _ver(gpu.driver_version),
        "cudaDriverVersion": _ver(gpu.cuda_driver_version),
        "resource.kubernetes.io/pciBusID": _str(gpu.pci_bus_id),
    }
    if device.uuid:  # a dynamic MIG placement has none until it is created
        attrs["uuid"] = _str(device.uuid)
    if gpu.pcie_root:
        attrs["resource.kubernetes.io/pcieRoot"] = _str(gpu.pcie_root)
    if gpu.numa_node is not None:
        # The standard attribute (NVIDIA v0.5 published it): matchAttribute keeps GPUs and
        # NICs of one claim on one NUMA node.
        attrs[NUMA_NODE_ATTRIBUTE] = _numa_node(gpu.numa_node, as_list=list_attributes)
    if gpu.addressing_mode is not None and gpu.addressing_mode.name != "NONE":
        attrs["addressingMode"] = _str(gpu.addressing_mode.name)
    if partitions is not None and device.type is DeviceType.GPU:
        attrs.update(partitions.of(gpu))
    capacity: dict[str, object] = {}
    if device.memory_bytes is not None:
        capacity["memory"] = {"value": binary_quantity(device.memory_bytes)}
    if device.type is DeviceType.MIG and device.mig is not None:
        attrs["parentUUID"] = _str(gpu.uuid)
        attrs["profile"] = _str(device.mig.profile_name)
        profile = device.profile
        capacity["multiprocessors"] = {"value": str(device.mig.multiprocessor_count)}
        if profile is not None:
            capacity["copyEngines"] = {"value": str(profile.copy_engine_count)}
            capacity["decoders"] = {"value": str(profile.decoder_count)}
            capacity["encoders"] = {"value": str(profile.encoder_count)}
            capacity["jpegEngines"] = {"value": str(profile.jpeg_count)}
            capacity["ofaEngines"] = {"value": str(profile.ofa_count)}
        # The memory slices it occupies, as NVIDIA publishes them for static MIG devices.
        for i in device.mig.placement.slices:
            capacity[f"memorySlice{i}"] = {"value": "1"}
    consumes: dict[str, Any] | None = None
    if device.dynamic and device.profile is not None and device.placement_start is not None:
        offer = MigOffer(gpu, device.profile, device.placement_start)
        attrs["parentUUID"] = _str(gpu.uuid)
        attrs["profile"] = _str(device.profile.name)
        capacity = offer.capacity()
        consumes = offer.consumption()
    elif device.partitionable:
        capacity = full_gpu_capacity(gpu)
        consumes = full_gpu_consumption(gpu)
    out: dict[str, object] = {"name": device.name, "attributes": dict(sorted(attrs.items()))}
    if capacity:
        out["capacity"] = dict(sorted(capacity.items()))
    if consumes is not None:
        out["consumesCounters"] = [consumes]
    out = _with_taint(out, health)
    if consumable is not None and consumable.enabled:
        out = consumable.shape_device(out, device.memory_bytes)
    return out


def _with_taint(out: dict[str, object], health: DeviceHealth | None) -> dict[str, object]:
    """``out`` with the taint of an unhealthy device."""
    if health is not None and not health.healthy and health.taint_key:
        taint: dict[str, object] = {
            "key": health.taint_key,
            "effect": _TAINT_EFFECTS.get(health.taint_key, "NoSchedule"),
        }
        if health.taint_value:
            taint["value"] = health.taint_value
        out["taints"] = [taint]
    return out


def build_resource_slices(
    spec: SliceSpec,
    devices: Sequence[NodeDevice],
    *,
    generation: int,
    health: Mapping[str, DeviceHealth] | None = None,
    publication: SlicePublication | None = None,
) -> list[dict[str, Any]]:
    """The complete pool as ResourceSlice objects (``metadata.generateName``, no name).

    A node without devices still gets one empty slice, so the scheduler sees a complete pool.
    """
    health = health or {}
    pub = publication or SlicePublication()
    rendered = [
        device_json(
            d,
            health.get(d.name),
            consumable=pub.consumable,
            list_attributes=pub.list_attributes,
            partitions=pub.partitions,
        )
        for d in devices
    ]
    bodies: list[dict[str, Any]]
    if any(d.partitionable for d in devices):
        bodies = _partitioned_bodies(devices, rendered, split=pub.split_counters)
    else:
        limited = any("taints" in d or _has_list_attribute(d) for d in rendered)
        per_slice = MAX_DEVICES_PER_SLICE_WITH_TAINTS if limited else MAX_DEVICES_PER_SLICE
        chunks = [rendered[i : i + per_slice] for i in range(0, len(rendered), per_slice)]
        bodies = [{"devices": chunk} for chunk in chunks] or [{"devices": []}]
    metadata: dict[str, object] = {"generateName": f"{spec.node_name}-{spec.driver_name}-"}
    if spec.node_uid:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "name": spec.node_name,
                "uid": spec.node_uid,
                "controller": True,
            }
        ]
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": dict(metadata),
            "spec": {
                "driver": spec.driver_name,
                "nodeName": spec.node_name,
                "pool": {
                    "name": spec.node_name,
                    "generation": generation,
                    "resourceSliceCount": len(bodies),
                },
                **body,
            },
        }
        for body in bodies
    ]


def _has_list_attribute(device: Mapping[str, Any]) -> bool:
    attributes = device.get("attributes") or {}
    return any(
        key in value
        for value in attributes.values()
        for key in ("ints", "bools", "strings", "versions")
    )


def _partitioned_bodies(
    devices: Sequence[NodeDevice], rendered: Sequence[dict[str, Any]], *, split: bool
) -> list[dict[str, Any]]:
    """One device slice per GPU; partitionable GPUs bring their counter set."""
    per_gpu: dict[str, tuple[dict[str, Any] | None, list[dict[str, Any]]]] = {}
    for device, body in zip(devices, rendered, strict=True):
        if device.gpu.uuid not in per_gpu:
            counters = counter_set_json(device.gpu) if device.partitionable else None
            per_gpu[device.gpu.uuid] = (counters, [])
        per_gpu[device.gpu.uuid][1].append(body)
    return split_layout(list(per_gpu.values()), split=split)


def gpu_slice_source(
    spec: SliceSpec,
    devices: Callable[[], Sequence[NodeDevice]],
    health: HealthHub,
    publication: SlicePublication | None = None,
) -> SliceSource:
    """The GPU plugin's slices for the core's publisher: the current ``devices()`` with the
    taints of ``health`` and the sharing forms of ``publication``, for any generation."""

    def build(generation: int) -> list[dict[str, Any]]:
        snapshot = {h.device_name: h for h in health.snapshot()}
        return build_resource_slices(
            spec, devices(), generation=generation, health=snapshot, publication=publication
        )

    return build
