"""The fake backend: a simulated GPU node kept in a locked JSON file.

It refuses what the hardware refuses (MIG on parts without it, overlapping placements,
exhausted profiles, operations on lost GPUs) with the same exception types the NVML backend
raises, and offers fault injection (XID/ECC events, GPU lost, an operation that fails once).

Crash tests pause a process right after an operation took effect with
``DRA_NVLIB_FAKE_HOLD_AFTER=OPERATION:DIR`` (see :func:`hold_after`), so a SIGKILL lands
at a known point, e.g. between a MIG device's creation and the checkpoint that records it.
"""

from __future__ import annotations

import enum
import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dra_nvlib.devicelib import DeviceLib, HealthWatch
from dra_nvlib.errors import (
    DeviceError,
    FakeStateError,
    GpuLostError,
    GpuNotFoundError,
    InsufficientResourcesError,
    InUseError,
    InvalidArgumentError,
    InvalidStateError,
    NoPermissionError,
    NotSupportedError,
    NvmlCallError,
    PlacementConflictError,
)
from dra_nvlib.facts import (
    ComputeMode,
    DriverInfo,
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
from dra_nvlib.fake_pci_bus import FakePciBus
from dra_nvlib.fake_state import (
    STATE_VERSION,
    EventState,
    FabricEntry,
    FakeStateStore,
    FaultState,
    GiState,
    GpuState,
    NodeState,
)
from dra_nvlib.fleet import FleetSpec, load_fleet_spec
from dra_nvlib.identity import (
    cluster_uuid,
    gpu_uuid,
    mig_uuid,
    numa_node,
    pci_bus_id,
    pcie_root,
)
from dra_nvlib.mig_placement import ExistingInstance, Refusal, check_create, profile_spec
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
)


class FaultKind(enum.Enum):
    """The error an armed fault raises (the NVML return code it stands for)."""

    NOT_SUPPORTED = "not-supported"
    NO_PERMISSION = "no-permission"
    IN_USE = "in-use"
    INSUFFICIENT_RESOURCES = "insufficient-resources"
    GPU_LOST = "gpu-lost"
    UNKNOWN = "unknown"


def _fault_error(kind: FaultKind, *, gpu: str, operation: str) -> DeviceError:
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
                _new_instance(gpu, profile_id=planned.profile_id, start=planned.start)
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


def _new_instance(gpu: GpuState, *, profile_id: int, start: int) -> GiState:
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


def _mig_devices(gpu: GpuState, model: GpuModel) -> tuple[MigDevice, ...]:
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
        addressing_mode=model.addressing_mode,
        mig_capable=model.mig_capable,
        mig_mode=MigModeState(current=gpu["mig_current"], pending=gpu["mig_pending"]),
        mig_profiles=mig_profiles_of(model),
        mig_devices=_mig_devices(gpu, model),
        compute_mode=ComputeMode(gpu["compute_mode"]),
        fabric=fabric,
        time_slice=TimeSliceLevel(gpu["time_slice"]),
        lost=gpu["lost"],
    )


def _find_gpu(doc: NodeState, uuid: str, *, operation: str) -> GpuState:
    for gpu in doc["gpus"]:
        if gpu["uuid"] == uuid:
            return gpu
    raise GpuNotFoundError(uuid, operation, "no such GPU on this node")


def _take_fault(doc: NodeState, operation: str, *, gpu: str | None) -> DeviceError | None:
    for fault in doc["faults"]:
        if fault["operation"] != operation or fault["remaining"] <= 0:
            continue
        if fault["gpu_uuid"] is not None and fault["gpu_uuid"] != gpu:
            continue
        fault["remaining"] -= 1
        doc["faults"] = [f for f in doc["faults"] if f["remaining"] > 0]
        return _fault_error(FaultKind(fault["error"]), gpu=gpu or "*", operation=operation)
    return None


def _append_event(
    doc: NodeState,
    kind: HealthEventKind,
    *,
    gpu: str,
    xid: int | None = None,
    gi_id: int | None = None,
    ci_id: int | None = None,
    description: str = "",
) -> None:
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


#: ``OPERATION:DIR``: after ``OPERATION`` took effect, wait for ``DIR/OPERATION.release``.
ENV_HOLD_AFTER = "DRA_NVLIB_FAKE_HOLD_AFTER"


def hold_after(operation: str, environ: Mapping[str, str] | None = None) -> None:
    """Test hook: when ``$DRA_NVLIB_FAKE_HOLD_AFTER`` is ``OPERATION:DIR`` for this
    operation, write ``DIR/OPERATION.held`` (with this pid) and block until
    ``DIR/OPERATION.release`` exists. Only the fake backend has it; crash tests use it to
    SIGKILL a process at an exact point after a side effect and before what follows."""
    value = (os.environ if environ is None else environ).get(ENV_HOLD_AFTER, "")
    name, sep, directory = value.partition(":")
    if not sep or name != operation:
        return
    where = Path(directory)
    held = where / f"{operation}.held"
    tmp = held.with_suffix(".tmp")
    tmp.write_text(f"{os.getpid()}\n")
    tmp.replace(held)
    while not (where / f"{operation}.release").exists():
        time.sleep(0.01)


class FakeDeviceLib(DeviceLib):
    """A simulated node. Build it with :func:`dra_nvlib.open_device_lib` (``backend="fake"``)
    or :meth:`open`; every instance on the same state file sees the same node."""

    backend = "fake"

    def __init__(self, store: FakeStateStore) -> None:
        self._store = store
        self._closed = False

    @property
    def state_path(self) -> Path:
        """The JSON file holding this node's state."""
        return self._store.path

    @classmethod
    def open(cls, *, state_path: Path, fleet: str | None, node_name: str) -> FakeDeviceLib:
        """Attach to the node in ``state_path``, creating it from ``fleet`` if absent.

        An existing file for another node or fleet is refused rather than overwritten, so a
        misconfiguration never silently discards MIG devices.
        """
        spec = load_fleet_spec(fleet) if fleet else None
        store = FakeStateStore(state_path)
        with store.transaction() as tx:
            if tx.doc is None:
                if spec is None:
                    raise FakeStateError(str(state_path), "does not exist and no fleet was given")
                tx.replace(initial_state(spec, node_name=node_name))
            else:
                if tx.doc["node_name"] != node_name:
                    raise FakeStateError(
                        str(state_path),
                        f"belongs to node {tx.doc['node_name']!r}, not {node_name!r}",
                    )
                if spec is not None and tx.doc["fleet"] != spec.source:
                    raise FakeStateError(
                        str(state_path),
                        f"holds fleet {tx.doc['fleet']!r}, not {spec.source!r}; "
                        "remove the file to start a new fleet",
                    )
        return cls(store)

    def _snapshot(self) -> NodeState:
        doc = self._store.read()
        if doc is None:
            raise FakeStateError(str(self._store.path), "state file disappeared")
        return doc

    # -- queries ---------------------------------------------------------------------------

    def driver_info(self) -> DriverInfo:
        """Driver versions the fake node reports."""
        doc = self._snapshot()
        return DriverInfo(
            driver_version=doc["driver_version"],
            cuda_driver_version=doc["cuda_driver_version"],
            nvml_version=doc["nvml_version"],
        )

    def gpus(self) -> tuple[GpuInfo, ...]:
        """All GPUs, lost ones included (flagged ``lost=True``)."""
        doc = self._snapshot()
        if doc["faults"]:
            # Only an armed fault needs the exclusive lock (to consume it atomically).
            error: DeviceError | None = None
            with self._store.transaction() as tx:
                doc = tx.node()
                error = _take_fault(doc, "gpus", gpu=None)
                if error is None:
                    tx.dirty = False
            if error is not None:
                raise error
        return tuple(gpu_info_of(g, doc) for g in doc["gpus"])

    # -- operations ------------------------------------------------------------------------

    def _mutate(
        self, operation: str, gpu_uuid: str, *, change: Callable[[NodeState, GpuState], None]
    ) -> None:
        error: DeviceError | None = None
        with self._store.transaction() as tx:
            doc = tx.node()
            gpu = _find_gpu(doc, gpu_uuid, operation=operation)
            error = _take_fault(doc, operation, gpu=gpu_uuid)
            if error is None:
                if gpu["lost"]:
                    error = GpuLostError(gpu_uuid, operation, "GPU is lost")
                else:
                    try:
                        change(doc, gpu)
                    except DeviceError as exc:
                        error = exc
        if error is not None:
            raise error
        hold_after(operation)

    def set_compute_mode(self, gpu_uuid: str, mode: ComputeMode) -> None:
        """Set the compute mode; EXCLUSIVE_THREAD is refused as current drivers do."""

        def change(_doc: NodeState, gpu: GpuState) -> None:
            if mode is ComputeMode.EXCLUSIVE_THREAD:
                raise NotSupportedError(
                    gpu_uuid, "set_compute_mode", "EXCLUSIVE_THREAD was removed from the driver"
                )
            gpu["compute_mode"] = int(mode)

        self._mutate("set_compute_mode", gpu_uuid, change=change)

    def persistence_mode(self, gpu_uuid: str) -> bool:
        """Persistence mode (on for a freshly booted fake GPU, as data-center nodes run)."""
        gpu = _find_gpu(self._snapshot(), gpu_uuid, operation="persistence_mode")
        return bool(gpu.get("persistence_mode", True))

    def set_persistence_mode(self, gpu_uuid: str, *, enabled: bool) -> None:
        """Record persistence mode."""

        def change(_doc: NodeState, gpu: GpuState) -> None:
            gpu["persistence_mode"] = enabled

        self._mutate("set_persistence_mode", gpu_uuid, change=change)

    def set_time_slice(self, gpu_uuid: str, level: TimeSliceLevel) -> None:
        """Set the time-slice level; refused while MIG mode is on (no time-slicing of MIG)."""

        def change(_doc: NodeState, gpu: GpuState) -> None:
            if gpu["mig_current"]:
                raise InvalidStateError(
                    gpu_uuid, "set_time_slice", "time-slice cannot be set while MIG mode is on"
                )
            gpu["time_slice"] = int(level)

        self._mutate("set_time_slice", gpu_uuid, change=change)

    def set_mig_mode(self, gpu_uuid: str, *, enabled: bool) -> MigModeState:
        """Toggle MIG mode; applied at once because the fake GPU is idle (the driver resets
        an idle GPU itself)."""

        def change(_doc: NodeState, gpu: GpuState) -> None:
            model = GPU_MODELS[gpu["model"]]
            if not model.mig_capable:
                raise NotSupportedError(
                    gpu_uuid, "set_mig_mode", f"{model.product_name} has no MIG"
                )
            if not enabled and gpu["gpu_instances"]:
                raise InUseError(
                    gpu_uuid,
                    "set_mig_mode",
                    f"{len(gpu['gpu_instances'])} MIG device(s) exist; destroy them first",
                )
            gpu["mig_current"] = enabled
            gpu["mig_pending"] = enabled
            if enabled:
                gpu["time_slice"] = int(TimeSliceLevel.DEFAULT)

        self._mutate("set_mig_mode", gpu_uuid, change=change)
        info = self.gpu(gpu_uuid)
        return info.mig_mode

    def create_mig_device(
        self, gpu_uuid: str, *, profile_id: int, placement_start: int
    ) -> MigDevice:
        """Create a GI at the placement plus its full CI, enforcing the hardware's rules."""
        created: list[str] = []

        def change(_doc: NodeState, gpu: GpuState) -> None:
            op = "create_mig_device"
            model = GPU_MODELS[gpu["model"]]
            if not model.mig_capable:
                raise NotSupportedError(gpu_uuid, op, f"{model.product_name} has no MIG")
            if not gpu["mig_current"]:
                raise InvalidStateError(gpu_uuid, op, "MIG mode is disabled")
            existing: list[ExistingInstance] = []
            for gi in gpu["gpu_instances"]:
                spec = profile_spec(model, gi["profile_id"])
                size = spec.memory_slices if spec else 0
                existing.append(ExistingInstance(gi["profile_id"], MigPlacement(gi["start"], size)))
            refusal = check_create(model, existing, profile_id=profile_id, start=placement_start)
            if refusal is not None:
                reason, message = refusal
                if reason in (Refusal.UNKNOWN_PROFILE, Refusal.BAD_PLACEMENT):
                    raise InvalidArgumentError(gpu_uuid, op, message)
                if reason is Refusal.OVERLAP:
                    raise PlacementConflictError(gpu_uuid, op, message)
                raise InsufficientResourcesError(gpu_uuid, op, message)
            entry = _new_instance(gpu, profile_id=profile_id, start=placement_start)
            gpu["gpu_instances"].append(entry)
            created.append(entry["uuid"])

        self._mutate("create_mig_device", gpu_uuid, change=change)
        for dev in self.gpu(gpu_uuid).mig_devices:
            if dev.uuid == created[0]:
                return dev
        raise FakeStateError(str(self._store.path), f"MIG device {created[0]} vanished")

    def destroy_mig_device(self, mig_uuid: str) -> None:
        """Destroy the MIG device's CI and GI."""
        doc = self._snapshot()
        for gpu in doc["gpus"]:
            if any(gi["uuid"] == mig_uuid for gi in gpu["gpu_instances"]):
                parent = gpu["uuid"]
                break
        else:
            raise GpuNotFoundError(mig_uuid, "destroy_mig_device", "no such MIG device")

        def change(_doc: NodeState, gpu: GpuState) -> None:
            before = len(gpu["gpu_instances"])
            gpu["gpu_instances"] = [gi for gi in gpu["gpu_instances"] if gi["uuid"] != mig_uuid]
            if len(gpu["gpu_instances"]) == before:
                raise GpuNotFoundError(mig_uuid, "destroy_mig_device", "no such MIG device")

        self._mutate("destroy_mig_device", parent, change=change)

    def watch_health(self, gpu_uuids: Sequence[str] | None = None) -> HealthWatch:
        """Events recorded after this call, for the given GPUs (all when ``None``)."""
        doc = self._snapshot()
        return FakeHealthWatch(self._store, start_seq=doc["next_seq"], gpus=gpu_uuids)

    def pci_bus(self) -> FakePciBus:
        """The fake host tree next to the state file (``<state>.host/``), built on first use
        with every GPU bound to ``nvidia``; every process of the node sees the same tree."""
        bus = FakePciBus(self._store.path.with_name(self._store.path.stem + ".host"))
        if not bus.exists():
            gpus = self.gpus()
            # The state file's lock also serialises the build between the node's processes.
            with self._store.transaction():
                if not bus.exists():
                    bus.build(gpus)
        return bus

    def close(self) -> None:
        """Nothing to release; the state stays on disk for other processes."""
        self._closed = True

    # -- fault injection -------------------------------------------------------------------

    def inject_xid(
        self, gpu_uuid: str, xid: int, *, gi_id: int | None = None, ci_id: int | None = None
    ) -> None:
        """Record an XID error event for the GPU (optionally for one MIG GI/CI)."""
        with self._store.transaction() as tx:
            doc = tx.node()
            _find_gpu(doc, gpu_uuid, operation="inject_xid")
            _append_event(
                doc,
                HealthEventKind.XID,
                gpu=gpu_uuid,
                xid=xid,
                gi_id=gi_id,
                ci_id=ci_id,
                description=f"Xid {xid}",
            )

    def inject_ecc_error(self, gpu_uuid: str, *, double_bit: bool) -> None:
        """Record a single- or double-bit ECC error event."""
        kind = HealthEventKind.ECC_DOUBLE_BIT if double_bit else HealthEventKind.ECC_SINGLE_BIT
        with self._store.transaction() as tx:
            doc = tx.node()
            _find_gpu(doc, gpu_uuid, operation="inject_ecc_error")
            _append_event(doc, kind, gpu=gpu_uuid, description=kind.value)

    def mark_gpu_lost(self, gpu_uuid: str) -> None:
        """The GPU falls off the bus: it stays listed with ``lost=True``, every operation on it
        raises GpuLostError, and a GPU_LOST event is recorded."""
        with self._store.transaction() as tx:
            doc = tx.node()
            gpu = _find_gpu(doc, gpu_uuid, operation="mark_gpu_lost")
            gpu["lost"] = True
            _append_event(doc, HealthEventKind.GPU_LOST, gpu=gpu_uuid, description="GPU is lost")

    def fail_next(
        self,
        operation: str,
        *,
        error: FaultKind = FaultKind.UNKNOWN,
        gpu_uuid: str | None = None,
        times: int = 1,
    ) -> None:
        """Arm a fault: the next ``times`` calls of ``operation`` (on ``gpu_uuid`` or any GPU)
        fail with ``error`` and then the operation works again."""
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation!r}; one of {', '.join(OPERATIONS)}")
        if times < 1:
            raise ValueError("times must be at least 1")
        fault: FaultState = {
            "operation": operation,
            "gpu_uuid": gpu_uuid,
            "error": error.value,
            "remaining": times,
        }
        with self._store.transaction() as tx:
            tx.node()["faults"].append(fault)

    def set_fabric_state(self, gpu_uuid: str, state: FabricState, *, status: int = 0) -> None:
        """Change a GPU's fabric registration state (e.g. IN_PROGRESS during bring-up)."""
        with self._store.transaction() as tx:
            gpu = _find_gpu(tx.node(), gpu_uuid, operation="set_fabric_state")
            if gpu["fabric"] is None:
                raise NotSupportedError(gpu_uuid, "set_fabric_state", "GPU has no NVLink fabric")
            gpu["fabric"]["state"] = int(state)
            gpu["fabric"]["status"] = status


class FakeHealthWatch(HealthWatch):
    """Polls the state file for events newer than the subscription."""

    POLL_INTERVAL_S = 0.02

    def __init__(
        self, store: FakeStateStore, *, start_seq: int, gpus: Sequence[str] | None
    ) -> None:
        self._store = store
        self._next = start_seq
        self._gpus = None if gpus is None else frozenset(gpus)
        self._closed = False
        self._mtime_ns = -1

    def _poll(self) -> HealthEvent | None:
        try:
            mtime = os.stat(self._store.path).st_mtime_ns
        except FileNotFoundError:
            return None
        if mtime == self._mtime_ns:
            return None
        doc = self._store.read()
        if doc is None:
            return None
        for event in doc["events"]:
            if event["seq"] < self._next:
                continue
            self._next = event["seq"] + 1
            if self._gpus is not None and event["gpu_uuid"] not in self._gpus:
                continue
            return _event_of(event, doc)
        self._mtime_ns = mtime
        return None

    def wait(self, timeout_s: float) -> HealthEvent | None:
        """Next matching event, or ``None`` after ``timeout_s``."""
        if self._closed:
            raise RuntimeError("health watch is closed")
        deadline = time.monotonic() + max(timeout_s, 0.0)
        while True:
            event = self._poll()
            if event is not None:
                return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            time.sleep(min(self.POLL_INTERVAL_S, remaining))

    def close(self) -> None:
        """Stop watching."""
        self._closed = True


def _event_of(event: EventState, doc: NodeState) -> HealthEvent:
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
