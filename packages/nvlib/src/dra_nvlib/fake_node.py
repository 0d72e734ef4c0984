"""The fake node's state as pure functions: a fleet's initial state, the facts a state implies
(GPU info, MIG profiles and devices), armed faults and the bounded event history.

:mod:`dra_nvlib.fake_backend` reads and changes the state under the store's lock; nothing here
does I/O.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable

from dra_nvlib.errors import (
    DeviceError,
    GpuLostError,
    GpuNotFoundError,
    InsufficientResourcesError,
    InUseError,
    NoPermissionError,
    NotSupportedError,
    NvmlCallError,
)
from dra_nvlib.facts import (
    ComputeMode,
    FabricInfo,
    FabricState,
    GpuInfo,
    HealthEvent,
    HealthEventKind,
    MigDevice,
    MigModeState,
    MigPlacement,
    MigProfile,
    TimeSliceLevel,
)
from dra_nvlib.fake_state import (
    STATE_VERSION,
    EventState,
    FabricEntry,
    GiState,
    GpuState,
    NodeState,
)
from dra_nvlib.fleet import FleetSpec
from dra_nvlib.identity import (
    cluster_uuid,
    gpu_uuid,
    mig_uuid,
    numa_node,
    pci_bus_id,
    pcie_root,
)
from dra_nvlib.mig_placement import profile_spec
from dra_nvlib.profiles import GPU_MODELS, MIB, GpuModel

FAKE_DRIVER_VERSION = "570.133.20"
FAKE_CUDA_DRIVER_VERSION = "12.8"
FAKE_NVML_VERSION = "12.570.133.20"

MAX_EVENTS = 1000

# Operation names, as used in errors and in fail_next().
OPERATIONS = (
    "gpus",
    "set_compute_mode",
    "set_time_slice",
    "set_mig_mode",
    "create_mig_device",
    "destroy_mig_device",
    "set_persistence_mode",
    "watch_health",
)


class FaultKind(enum.Enum):
    """The error an armed fault raises (the NVML return code it stands for)."""

    NOT_SUPPORTED = "not-supported"
    NO_PERMISSION = "no-permission"
    IN_USE = "in-use"
    INSUFFICIENT_RESOURCES = "insufficient-resources"
    GPU_LOST = "gpu-lost"
    UNKNOWN = "unknown"


def fault_error(kind: FaultKind, *, gpu: str, operation: str) -> DeviceError:
    """The typed error an armed fault of ``kind`` raises for ``operation`` on ``gpu``."""
    msg = f"injected fault ({kind.value})"
    factories: dict[FaultKind, Callable[[str, str, str], DeviceError]] = {
        FaultKind.NOT_SUPPORTED: NotSupportedError,
        FaultKind.NO_PERMISSION: NoPermissionError,
        FaultKind.IN_USE: InUseError,
        FaultKind.INSUFFICIENT_RESOURCES: InsufficientResourcesError,
        FaultKind.GPU_LOST: GpuLostError,
    }
    if kind is FaultKind.UNKNOWN:
        return NvmlCallError(gpu, operation, msg, code=999)
    return factories[kind](gpu, operation, msg)


def initial_state(fleet: FleetSpec, *, node_name: str) -> NodeState:
    """The state of a freshly booted fake node (pure)."""
    gpus: list[GpuState] = []
    for index, entry in enumerate(fleet.models()):
        model = entry.model
        fabric: FabricEntry | None = None
        if model.fabric_capable:
            fabric = {
                "cluster_uuid": cluster_uuid(entry.cluster),
                "clique_id": entry.clique_id,
                "state": int(FabricState.COMPLETED),
                "status": 0,
            }
        gpus.append(
            {
                "index": index,
                "model": model.key,
                "uuid": gpu_uuid(node_name, index=index, model_key=model.key),
                "minor": index,
                "pci_bus_id": pci_bus_id(index),
                "pcie_root": pcie_root(index),
                "compute_mode": int(ComputeMode.DEFAULT),
                "time_slice": int(TimeSliceLevel.DEFAULT),
                "mig_current": entry.mig_enabled,
                "mig_pending": entry.mig_enabled,
                "lost": False,
                "fabric": fabric,
                "gpu_instances": [],
            }
        )
        gpu = gpus[-1]
        for planned in entry.mig_instances:
            gpu["gpu_instances"].append(
                new_instance(gpu, profile_id=planned.profile_id, start=planned.start)
            )
    return {
        "version": STATE_VERSION,
        "node_name": node_name,
        "fleet": fleet.source,
        "driver_version": FAKE_DRIVER_VERSION,
        "cuda_driver_version": FAKE_CUDA_DRIVER_VERSION,
        "nvml_version": FAKE_NVML_VERSION,
        "gpus": gpus,
        "events": [],
        "next_seq": 1,
        "faults": [],
    }


def new_instance(gpu: GpuState, *, profile_id: int, start: int) -> GiState:
    """A GPU instance with its full compute instance, under the GPU's lowest free GI id (the
    placement was checked by the caller)."""
    used = {gi["gi_id"] for gi in gpu["gpu_instances"]}
    gi_id = next(i for i in range(1, 64) if i not in used)
    return {
        "gi_id": gi_id,
        "ci_id": 0,
        "profile_id": profile_id,
        "start": start,
        "uuid": mig_uuid(gpu["uuid"], gi_id=gi_id, ci_id=0),
    }


@functools.cache
def mig_profiles_of(model: GpuModel) -> tuple[MigProfile, ...]:
    """The model's MIG profile table as facts (pure; cached, the table never changes)."""
    return tuple(
        MigProfile(
            name=spec.name,
            profile_id=spec.profile_id,
            nvml_profile=spec.nvml_profile,
            slice_count=spec.slice_count,
            instance_count=spec.instance_count,
            memory_bytes=spec.memory_mib * MIB,
            memory_slices=spec.memory_slices,
            multiprocessor_count=spec.multiprocessors,
            copy_engine_count=spec.copy_engines,
            decoder_count=spec.decoders,
            encoder_count=spec.encoders,
            jpeg_count=spec.jpeg,
            ofa_count=spec.ofa,
            placements=tuple(MigPlacement(s, spec.memory_slices) for s in spec.placement_starts),
        )
        for spec in model.mig_profiles
    )


def mig_devices_of(gpu: GpuState, model: GpuModel) -> tuple[MigDevice, ...]:
    """The MIG devices of ``gpu``'s GPU instances, ordered by GI id."""
    out: list[MigDevice] = []
    for pos, gi in enumerate(sorted(gpu["gpu_instances"], key=lambda g: g["gi_id"])):
        spec = profile_spec(model, gi["profile_id"])
        if spec is None:  # state written by a different profile table
            continue
        out.append(
            MigDevice(
                uuid=gi["uuid"],
                parent_uuid=gpu["uuid"],
                parent_index=gpu["index"],
                index=pos,
                gi_id=gi["gi_id"],
                ci_id=gi["ci_id"],
                profile_id=spec.profile_id,
                profile_name=spec.name,
                placement=MigPlacement(gi["start"], spec.memory_slices),
                memory_bytes=spec.memory_mib * MIB,
                multiprocessor_count=spec.multiprocessors,
            )
        )
    return tuple(out)


def gpu_info_of(gpu: GpuState, doc: NodeState) -> GpuInfo:
    """Facts of one fake GPU (pure)."""
    model = GPU_MODELS[gpu["model"]]
    fabric = None
    if gpu["fabric"] is not None:
        f = gpu["fabric"]
        fabric = FabricInfo(
            cluster_uuid=f["cluster_uuid"],
            clique_id=f["clique_id"],
            state=FabricState(f["state"]),
            status=f["status"],
        )
    return GpuInfo(
        index=gpu["index"],
        minor=gpu["minor"],
        uuid=gpu["uuid"],
        product_name=model.product_name,
        brand=model.brand,
        architecture=model.architecture,
        cuda_compute_capability=model.compute_capability,
        driver_version=doc["driver_version"],
        cuda_driver_version=doc["cuda_driver_version"],
        memory_bytes=model.memory_mib * MIB,
        pci_bus_id=gpu["pci_bus_id"],
        pcie_root=gpu["pcie_root"],
        numa_node=numa_node(gpu["index"]),
        # Baseboard modules count from 1 in enumeration order, as on HGX systems (the fake
        # Fabric Manager's partitions name the same numbers).
        module_id=gpu["index"] + 1,
        addressing_mode=model.addressing_mode,
        mig_capable=model.mig_capable,
        mig_mode=MigModeState(current=gpu["mig_current"], pending=gpu["mig_pending"]),
        mig_profiles=mig_profiles_of(model),
        mig_devices=mig_devices_of(gpu, model),
        compute_mode=ComputeMode(gpu["compute_mode"]),
        fabric=fabric,
        time_slice=TimeSliceLevel(gpu["time_slice"]),
        lost=gpu["lost"],
    )


def find_gpu(doc: NodeState, uuid: str, *, operation: str) -> GpuState:
    """The GPU ``uuid`` of the node; GpuNotFoundError naming ``operation`` when absent."""
    for gpu in doc["gpus"]:
        if gpu["uuid"] == uuid:
            return gpu
    raise GpuNotFoundError(uuid, operation, "no such GPU on this node")


def take_fault(doc: NodeState, operation: str, *, gpu: str | None) -> DeviceError | None:
    """Disarm one armed fault matching ``operation`` (and ``gpu``) and return its error."""
    for fault in doc["faults"]:
        if fault["operation"] != operation or fault["remaining"] <= 0:
            continue
        if fault["gpu_uuid"] is not None and fault["gpu_uuid"] != gpu:
            continue
        fault["remaining"] -= 1
        doc["faults"] = [f for f in doc["faults"] if f["remaining"] > 0]
        return fault_error(FaultKind(fault["error"]), gpu=gpu or "*", operation=operation)
    return None


def append_event(
    doc: NodeState,
    kind: HealthEventKind,
    *,
    gpu: str,
    xid: int | None = None,
    gi_id: int | None = None,
    ci_id: int | None = None,
    description: str = "",
) -> None:
    """Record a health event in the node's bounded history (watchers read it)."""
    event: EventState = {
        "seq": doc["next_seq"],
        "kind": kind.value,
        "gpu_uuid": gpu,
        "xid": xid,
        "gi_id": gi_id,
        "ci_id": ci_id,
        "description": description,
    }
    doc["next_seq"] += 1
    doc["events"].append(event)
    # Watchers only need recent history; bound the file so a noisy GPU cannot grow it forever.
    del doc["events"][:-MAX_EVENTS]


def event_of(event: EventState, doc: NodeState) -> HealthEvent:
    """The HealthEvent a stored event stands for, with the MIG device its GI id names."""
    mig: str | None = None
    if event["gi_id"] is not None:
        for gpu in doc["gpus"]:
            if gpu["uuid"] != event["gpu_uuid"]:
                continue
            for gi in gpu["gpu_instances"]:
                if gi["gi_id"] == event["gi_id"]:
                    mig = gi["uuid"]
    return HealthEvent(
        kind=HealthEventKind(event["kind"]),
        gpu_uuid=event["gpu_uuid"],
        xid=event["xid"],
        gi_id=event["gi_id"],
        ci_id=event["ci_id"],
        mig_uuid=mig,
        description=event["description"],
    )
