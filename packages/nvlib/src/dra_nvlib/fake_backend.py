"""The fake backend: a simulated GPU node kept in a locked JSON file.

It refuses what the hardware refuses (MIG on parts without it, overlapping placements,
exhausted profiles, operations on lost GPUs) with the same exception types the NVML backend
raises, and offers fault injection (XID/ECC events, GPU lost, an operation that fails once).

Crash tests pause a process right after an operation took effect with
``DRA_NVLIB_FAKE_HOLD_AFTER=OPERATION:DIR`` (see :func:`hold_after`), so a SIGKILL lands
at a known point, e.g. between a MIG device's creation and the checkpoint that records it.
"""

from __future__ import annotations

import os
import time
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dra_nvlib.devicelib import DeviceLib, HealthWatch, log_unidentified_lost_gpu
from dra_nvlib.errors import (
    DeviceError,
    FakeStateError,
    GpuLostError,
    GpuNotFoundError,
    InsufficientResourcesError,
    InUseError,
    InvalidArgumentError,
    InvalidStateError,
    NotSupportedError,
    PlacementConflictError,
)
from dra_nvlib.facts import (
    ComputeMode,
    DriverInfo,
    FabricState,
    GpuInfo,
    HealthEvent,
    HealthEventKind,
    MigDevice,
    MigModeState,
    MigPlacement,
    TimeSliceLevel,
)
from dra_nvlib.fake_node import (
    OPERATIONS,
    FaultKind,
    append_event,
    event_of,
    find_gpu,
    gpu_info_of,
    initial_state,
    new_instance,
    take_fault,
)
from dra_nvlib.fake_pci_bus import FakePciBus
from dra_nvlib.fake_state import (
    FakeStateStore,
    FaultState,
    GpuState,
    MemoryStateStore,
    NodeState,
)
from dra_nvlib.fleet import load_fleet_spec
from dra_nvlib.mig_placement import ExistingInstance, Refusal, check_create, profile_spec
from dra_nvlib.profiles import GPU_MODELS

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
        # GPUs this instance listed while healthy: as NVML's last known facts, only these
        # are still listed (flagged) once lost; see gpus().
        self._seen: set[str] = set()

    @property
    def state_path(self) -> Path:
        """The JSON file holding this node's state."""
        return self._store.path

    @classmethod
    def in_memory(cls, *, fleet: str, node_name: str) -> FakeDeviceLib:
        """A node of ``fleet`` kept in this process only: nothing is read or written, and
        no other process sees it (for a one-shot look, e.g. printing its slices)."""
        store = MemoryStateStore(f"<in-memory fake node {node_name}>")
        with store.transaction() as tx:
            tx.replace(initial_state(load_fleet_spec(fleet), node_name=node_name))
        return cls(store)

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
        """All GPUs as NVML enumerates them: a lost GPU this instance listed before stays
        listed (flagged ``lost=True``); one lost before this instance first saw it fails
        its handle as NVML does and is left out (logged), the others are listed."""
        doc = self._snapshot()
        if doc["faults"]:
            # Only an armed fault needs the exclusive lock (to consume it atomically).
            error: DeviceError | None = None
            with self._store.transaction() as tx:
                doc = tx.node()
                error = take_fault(doc, "gpus", gpu=None)
                if error is None:
                    tx.dirty = False
            if error is not None:
                raise error
        out: list[GpuInfo] = []
        for gpu in doc["gpus"]:
            if gpu["lost"] and gpu["uuid"] not in self._seen:
                log_unidentified_lost_gpu(gpu["index"], "GPU is lost")
                continue
            self._seen.add(gpu["uuid"])
            out.append(gpu_info_of(gpu, doc))
        return tuple(out)

    # -- operations ------------------------------------------------------------------------

    def _mutate(
        self, operation: str, gpu_uuid: str, *, change: Callable[[NodeState, GpuState], None]
    ) -> None:
        error: DeviceError | None = None
        with self._store.transaction() as tx:
            doc = tx.node()
            gpu = find_gpu(doc, gpu_uuid, operation=operation)
            error = take_fault(doc, operation, gpu=gpu_uuid)
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
        gpu = find_gpu(self._snapshot(), gpu_uuid, operation="persistence_mode")
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
            entry = new_instance(gpu, profile_id=profile_id, start=placement_start)
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
        """Events recorded after this call, for the given GPUs (all when ``None``).

        Refused as NVML refuses the registration: GpuNotFoundError for a GPU the node does
        not have, GpuLostError for a lost one; a fault armed for ``watch_health`` fails it.
        """
        with self._store.transaction() as tx:
            doc = tx.node()
            uuids = [g["uuid"] for g in doc["gpus"]] if gpu_uuids is None else list(gpu_uuids)
            error: DeviceError | None = None
            for uuid in uuids:
                gpu = find_gpu(doc, uuid, operation="watch_health")
                error = take_fault(doc, "watch_health", gpu=uuid)
                tx.dirty = error is not None  # written back only to consume the fault
                if error is None and gpu["lost"]:
                    error = GpuLostError(uuid, "watch_health", "GPU is lost")
                if error is not None:
                    break
        if error is not None:
            raise error
        return FakeHealthWatch(self._store, start_seq=doc["next_seq"], gpus=uuids)

    def pci_bus(self) -> FakePciBus:
        """The fake host tree next to the state file (``<state>.host/``; an in-memory node's in
        a temporary directory removed on close), built on first use
        with every GPU bound to ``nvidia``; every process of the node sees the same tree."""
        bus = FakePciBus(self._store.host_dir())
        if not bus.exists():
            # A lost GPU is still a PCI device of the host: every GPU of the node is built.
            doc = self._snapshot()
            gpus = tuple(gpu_info_of(g, doc) for g in doc["gpus"])
            # The state file's lock also serialises the build between the node's processes.
            with self._store.transaction():
                if not bus.exists():
                    bus.build(gpus)
        return bus

    def close(self) -> None:
        """Nothing to release for a state file (it stays for other processes); an in-memory
        node's temporary host tree is removed."""
        self._store.close()
        self._closed = True

    # -- fault injection -------------------------------------------------------------------

    def inject_xid(
        self, gpu_uuid: str, xid: int, *, gi_id: int | None = None, ci_id: int | None = None
    ) -> None:
        """Record an XID error event for the GPU (optionally for one MIG GI/CI)."""
        with self._store.transaction() as tx:
            doc = tx.node()
            find_gpu(doc, gpu_uuid, operation="inject_xid")
            append_event(
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
            find_gpu(doc, gpu_uuid, operation="inject_ecc_error")
            append_event(doc, kind, gpu=gpu_uuid, description=kind.value)

    def mark_gpu_lost(self, gpu_uuid: str) -> None:
        """The GPU falls off the bus: it stays listed with ``lost=True``, every operation on it
        raises GpuLostError, and a GPU_LOST event is recorded."""
        with self._store.transaction() as tx:
            doc = tx.node()
            gpu = find_gpu(doc, gpu_uuid, operation="mark_gpu_lost")
            gpu["lost"] = True
            append_event(doc, HealthEventKind.GPU_LOST, gpu=gpu_uuid, description="GPU is lost")

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

    def set_fabric_state(
        self,
        gpu_uuid: str,
        state: FabricState,
        *,
        status: int = 0,
        cluster_uuid: str | None = None,
    ) -> None:
        """Change a GPU's fabric registration: ``state`` (e.g. IN_PROGRESS during bring-up),
        ``status`` (the NVML return code of a COMPLETED registration) and, when given,
        ``cluster_uuid`` (all zeros: NVLink without multi-node NVLink)."""
        if cluster_uuid is not None:
            try:
                cluster_uuid = str(uuidlib.UUID(cluster_uuid))
            except ValueError:
                raise InvalidArgumentError(
                    gpu_uuid, "set_fabric_state", f"cluster UUID {cluster_uuid!r} is not a UUID"
                ) from None
        with self._store.transaction() as tx:
            gpu = find_gpu(tx.node(), gpu_uuid, operation="set_fabric_state")
            if gpu["fabric"] is None:
                raise NotSupportedError(gpu_uuid, "set_fabric_state", "GPU has no NVLink fabric")
            gpu["fabric"]["state"] = int(state)
            gpu["fabric"]["status"] = status
            if cluster_uuid is not None:
                gpu["fabric"]["cluster_uuid"] = cluster_uuid


class FakeHealthWatch(HealthWatch):
    """Polls the state file for events newer than the subscription.

    A lost GPU behaves as in NVML's event set: the wait answers at once, first with one
    GPU_LOST event per lost GPU, then with GpuLostError on every call.
    """

    #: NVML's wait blocks in the driver; this one stats the state file. Every GPU's monitor
    #: waits all the time, so at 0.02 s an idle plugin with 8 fake GPUs spent 0.03 core
    #: polling (the scale benchmark's real node counted it as our plugin's CPU); at 0.25 s
    #: it spends < 0.01 core, and an injected event still shows within a quarter second.
    POLL_INTERVAL_S = 0.25

    def __init__(self, store: FakeStateStore, *, start_seq: int, gpus: Sequence[str]) -> None:
        self._store = store
        self._next = start_seq
        self._gpus = frozenset(gpus)
        self._closed = False
        self._mtime_ns = -1
        self._reported_lost: set[str] = set()

    def _poll(self) -> HealthEvent | None:
        try:
            mtime = os.stat(self._store.path).st_mtime_ns
        except FileNotFoundError:
            return None
        if mtime == self._mtime_ns:
            self._raise_if_lost()
            return None
        doc = self._store.read()
        if doc is None:
            return None
        lost = sorted(g["uuid"] for g in doc["gpus"] if g["lost"] and g["uuid"] in self._gpus)
        for uuid in lost:
            if uuid not in self._reported_lost:
                self._reported_lost.add(uuid)
                return HealthEvent(HealthEventKind.GPU_LOST, uuid, description="GPU is lost")
        self._raise_if_lost()
        for event in doc["events"]:
            if event["seq"] < self._next:
                continue
            self._next = event["seq"] + 1
            if event["gpu_uuid"] not in self._gpus:
                continue
            if event["kind"] == HealthEventKind.GPU_LOST.value:
                continue  # reported from the GPU's state above
            return event_of(event, doc)
        self._mtime_ns = mtime
        return None

    def _raise_if_lost(self) -> None:
        if self._reported_lost:
            gpus = ",".join(sorted(self._reported_lost))
            raise GpuLostError(gpus, "watch_health", "GPU is lost")

    def wait(self, timeout_s: float) -> HealthEvent | None:
        """Next matching event, or ``None`` after ``timeout_s``.

        Raises:
            GpuLostError: a watched GPU is lost and was reported already.
        """
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
