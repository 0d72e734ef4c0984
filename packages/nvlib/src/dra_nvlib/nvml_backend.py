"""The NVML backend: facts and operations through :class:`~dra_nvlib.nvml_api.NvmlApi`.

Every :class:`~dra_nvlib.nvml_api.NvmlFailure` is translated here into a typed
:class:`~dra_nvlib.errors.DeviceError` naming the GPU and the operation.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import uuid as uuidlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from dra_nvlib.config import DeviceLibConfig
from dra_nvlib.devicelib import DeviceLib, HealthWatch, log_unidentified_lost_gpu
from dra_nvlib.errors import (
    DeviceError,
    GpuNotFoundError,
    InvalidArgumentError,
    LibraryLoadError,
    NotSupportedError,
)
from dra_nvlib.facts import (
    AddressingMode,
    Architecture,
    Brand,
    ComputeMode,
    CudaComputeCapability,
    DriverInfo,
    FabricInfo,
    FabricState,
    GpuInfo,
    MigDevice,
    MigModeState,
    MigPlacement,
    MigProfile,
    TimeSliceLevel,
)
from dra_nvlib.mig_profile_names import derived_profile_name
from dra_nvlib.nvidia_smi_exec import set_timeslice
from dra_nvlib.nvml_api import (
    EVENT_DOUBLE_BIT_ECC,
    EVENT_SINGLE_BIT_ECC,
    EVENT_XID,
    GI_PROFILE_INDICES,
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_UNINITIALIZED,
    NvmlApi,
    NvmlFailure,
    NvmlHandle,
    RawGiProfile,
)
from dra_nvlib.nvml_binding import PynvmlApi, find_library
from dra_nvlib.nvml_errors import translate
from dra_nvlib.nvml_health import NvmlHealthWatch
from dra_nvlib.pci_bus import PciBus, SysfsPciBus
from dra_nvlib.sysfs import normalize_bus_id, numa_node, pcie_root

T = TypeVar("T")
log = logging.getLogger(__name__)

#: What NVML answers once the driver was unloaded, reloaded or upgraded under a process that
#: initialised it before: re-initialising (reloading the library) is the way back.
_REINIT_CODES = frozenset(
    {NVML_ERROR_UNINITIALIZED, NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_LIB_RM_VERSION_MISMATCH}
)


def format_cuda_version(value: int) -> str:
    """NVML's 12040 as ``12.4``."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def profile_name(raw: RawGiProfile, *, nvml_profile: int, device_memory_bytes: int) -> str:
    """NVML's name without the ``MIG `` prefix, or one derived from the profile's numbers
    when NVML gives none (v1 records, NVIDIA's go-nvml mock systems)."""
    name = raw.name.strip()
    name = name[4:] if name.startswith("MIG ") else name
    if name:
        return name
    return derived_profile_name(
        nvml_profile=nvml_profile,
        slice_count=raw.slice_count,
        memory_mib=raw.memory_mib,
        device_memory_mib=device_memory_bytes // (1024 * 1024),
    )


class NvmlDeviceLib(DeviceLib):
    """GPUs of this node as NVML reports them."""

    backend = "nvml"

    def __init__(
        self, api: NvmlApi, *, sysfs_root: Path, nvidia_smi: Path, proc_root: Path = Path("/proc")
    ) -> None:
        self._api = api
        self._sysfs_root = sysfs_root
        self._proc_root = proc_root
        self._nvidia_smi = nvidia_smi
        self._lock = threading.RLock()
        self._closed = False
        self._known: dict[int, GpuInfo] = {}
        # A GPU's MIG profile table is fixed by the part; queried once (about 20 NVML calls).
        self._profiles: dict[str, tuple[MigProfile, ...]] = {}

    @classmethod
    def open(cls, config: DeviceLibConfig) -> NvmlDeviceLib:
        """Load ``libnvidia-ml.so.1`` from the configured driver root and initialise NVML."""
        library = config.nvml_library or find_library(config.driver_root)
        api = PynvmlApi(library)
        try:
            api.init()
        except NvmlFailure as exc:
            raise LibraryLoadError(str(library), str(exc)) from exc
        smi = config.nvidia_smi or config.driver_root / "usr" / "bin" / "nvidia-smi"
        return cls(api, sysfs_root=config.sysfs_root, nvidia_smi=smi, proc_root=config.proc_root)

    def _device(self, uuid: str) -> NvmlHandle:
        """``nvmlDeviceGetHandleByUUID``; a UUID NVML does not know is NOT_FOUND, also where
        the library answers INVALID_ARGUMENT (go-nvml's mock; NVML for a malformed UUID)."""
        try:
            return self._api.device_by_uuid(uuid)
        except NvmlFailure as exc:
            if exc.code not in (NVML_ERROR_NOT_FOUND, NVML_ERROR_INVALID_ARGUMENT):
                raise
            raise NvmlFailure(exc.function, NVML_ERROR_NOT_FOUND, str(exc)) from exc

    @contextlib.contextmanager
    def _op(self, gpu: str, operation: str) -> Iterator[None]:
        with self._lock:
            try:
                yield
            except NvmlFailure as exc:
                raise translate(exc, gpu=gpu, operation=operation) from exc

    def _optional(self, call: Callable[[], T]) -> T | None:
        """``None`` when NVML says the query is not supported on this GPU/driver."""
        try:
            return call()
        except NvmlFailure as exc:
            if exc.code in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_FUNCTION_NOT_FOUND):
                return None
            raise

    # -- queries ---------------------------------------------------------------------------

    def _reinit(self, failure: NvmlFailure) -> None:
        """Reload NVML after ``failure`` said the driver under it changed; caches go too,
        because a new driver may report other profiles."""
        log.warning(
            "NVML lost its driver; re-initialising",
            extra={"event": "nvml_reinit", "function": failure.function, "code": failure.code},
        )
        with self._lock:
            self._profiles.clear()
            try:
                self._api.reload()
            except NvmlFailure as exc:
                raise translate(exc, gpu="*", operation="reinit") from exc

    def _retrying(self, call: Callable[[], T]) -> T:
        """``call()``, once more after a re-initialisation when NVML lost its driver."""
        try:
            return call()
        except DeviceError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, NvmlFailure) and cause.code in _REINIT_CODES):
                raise
            self._reinit(cause)
        return call()

    def driver_info(self) -> DriverInfo:
        """Driver, CUDA driver and NVML versions."""
        return self._retrying(self._driver_info)

    def _driver_info(self) -> DriverInfo:
        with self._op("*", "driver_info"):
            return DriverInfo(
                driver_version=self._api.driver_version(),
                cuda_driver_version=format_cuda_version(self._api.cuda_driver_version()),
                nvml_version=self._api.nvml_version(),
            )

    def gpus(self) -> tuple[GpuInfo, ...]:
        """Enumerate every GPU; a lost GPU is reported from its last known facts, flagged.
        One lost before this process first saw it cannot be identified (NVML answers
        GPU_IS_LOST for its handle): it is left out with a log line, the others are listed.

        After a driver reload or upgrade (NVML uninitialised, driver not loaded, library and
        kernel module versions differ) NVML is loaded again and the enumeration repeated.
        """
        return self._retrying(self._gpus)

    def _gpus(self) -> tuple[GpuInfo, ...]:
        driver = self._driver_info()
        with self._op("*", "gpus"):
            count = self._api.device_count()
        out: list[GpuInfo] = []
        for index in range(count):
            try:
                with self._lock:
                    info = self._gpu_at(index, driver)
            except NvmlFailure as exc:
                if exc.code != NVML_ERROR_GPU_IS_LOST:
                    raise translate(exc, gpu=f"index {index}", operation="gpus") from exc
                if index in self._known:
                    out.append(dataclasses.replace(self._known[index], lost=True))
                else:
                    log_unidentified_lost_gpu(index, str(exc))
                continue
            self._known[index] = info
            out.append(info)
        return tuple(out)

    def _gpu_at(self, index: int, driver: DriverInfo) -> GpuInfo:
        api = self._api
        dev = api.device_by_index(index)
        uuid = api.uuid(dev)
        bus_id = normalize_bus_id(api.pci_bus_id(dev))
        mig = self._optional(lambda: api.mig_mode(dev))
        profiles: tuple[MigProfile, ...] = ()
        if mig is not None:
            profiles = self._profiles.get(uuid) or self._mig_profiles(dev)
            if profiles:
                self._profiles[uuid] = profiles
        devices = (
            self._mig_devices(dev, parent=uuid, parent_index=index, profiles=profiles)
            if mig and mig[0]
            else ()
        )
        addressing = self._optional(lambda: api.addressing_mode(dev))
        major, minor = api.cuda_compute_capability(dev)
        return GpuInfo(
            index=index,
            minor=api.minor_number(dev),
            uuid=uuid,
            product_name=api.name(dev),
            brand=Brand.from_nvml(api.brand(dev)),
            architecture=Architecture.from_nvml(api.architecture(dev)),
            cuda_compute_capability=CudaComputeCapability(major, minor),
            driver_version=driver.driver_version,
            cuda_driver_version=driver.cuda_driver_version,
            # Unified-memory parts (GB10, Jetson) answer NOT_SUPPORTED: no memory capacity.
            memory_bytes=self._optional(lambda: api.memory_total(dev)),
            pci_bus_id=bus_id,
            pcie_root=pcie_root(self._sysfs_root, bus_id),
            numa_node=numa_node(self._sysfs_root, bus_id),
            addressing_mode=AddressingMode(addressing) if addressing is not None else None,
            mig_capable=mig is not None,
            mig_mode=MigModeState(current=bool(mig and mig[0]), pending=bool(mig and mig[1])),
            mig_profiles=profiles,
            mig_devices=devices,
            compute_mode=ComputeMode(api.compute_mode(dev)),
            fabric=self._fabric(dev),
            module_id=self._module_id(dev),
        )

    def _module_id(self, dev: NvmlHandle) -> int | None:
        # 0 is no module (NVIDIA's driver treats it as unresolved too).
        value = self._optional(lambda: self._api.module_id(dev))
        return value or None

    def _fabric(self, dev: NvmlHandle) -> FabricInfo | None:
        raw = self._optional(lambda: self._api.fabric_info(dev))
        if raw is None or raw.state == FabricState.NOT_SUPPORTED:
            return None
        return FabricInfo(
            cluster_uuid=str(uuidlib.UUID(bytes=raw.cluster_uuid[:16])),
            clique_id=raw.clique_id,
            state=FabricState(raw.state),
            status=raw.status,
            health_mask=raw.health_mask,
        )

    def _mig_profiles(self, dev: NvmlHandle) -> tuple[MigProfile, ...]:
        device_memory = self._optional(lambda: self._api.memory_total(dev)) or 0
        out: list[MigProfile] = []
        seen: set[int] = set()
        for index in GI_PROFILE_INDICES:
            try:
                raw = self._api.gi_profile_info(dev, index)
            except NvmlFailure as exc:
                if exc.code in (
                    NVML_ERROR_NOT_SUPPORTED,
                    NVML_ERROR_INVALID_ARGUMENT,
                    NVML_ERROR_NOT_FOUND,
                    NVML_ERROR_FUNCTION_NOT_FOUND,
                ):
                    continue
                raise
            if raw.profile_id in seen:
                continue
            seen.add(raw.profile_id)
            placements = self._placements(dev, raw.profile_id)
            out.append(
                MigProfile(
                    name=profile_name(raw, nvml_profile=index, device_memory_bytes=device_memory),
                    profile_id=raw.profile_id,
                    nvml_profile=index,
                    slice_count=raw.slice_count,
                    instance_count=raw.instance_count,
                    memory_bytes=raw.memory_mib * 1024 * 1024,
                    memory_slices=placements[0].size if placements else 0,
                    multiprocessor_count=raw.multiprocessor_count,
                    copy_engine_count=raw.copy_engine_count,
                    decoder_count=raw.decoder_count,
                    encoder_count=raw.encoder_count,
                    jpeg_count=raw.jpeg_count,
                    ofa_count=raw.ofa_count,
                    placements=placements,
                )
            )
        return tuple(out)

    def _placements(self, dev: NvmlHandle, profile_id: int) -> tuple[MigPlacement, ...]:
        """The profile's possible placements; none where NVML cannot say (an unsupported or
        currently impossible profile): the profile stays listed, enumeration goes on."""
        try:
            found = self._api.gi_placements(dev, profile_id)
        except NvmlFailure as exc:
            if exc.code in _REINIT_CODES or exc.code == NVML_ERROR_GPU_IS_LOST:
                raise
            log.warning(
                "GPU instance placements unavailable",
                extra={
                    "event": "mig_placements_unavailable",
                    "profile_id": profile_id,
                    "code": exc.code,
                },
            )
            return ()
        return tuple(MigPlacement(start, size) for start, size in found)

    def _mig_devices(
        self,
        dev: NvmlHandle,
        *,
        parent: str,
        parent_index: int,
        profiles: tuple[MigProfile, ...],
    ) -> tuple[MigDevice, ...]:
        by_id = {p.profile_id: p for p in profiles}
        out: list[MigDevice] = []
        for i in range(self._api.max_mig_device_count(dev)):
            try:
                mig = self._api.mig_device_by_index(dev, i)
            except NvmlFailure as exc:
                if exc.code in (NVML_ERROR_NOT_FOUND, NVML_ERROR_INVALID_ARGUMENT):
                    continue
                raise
            gi_id = self._api.gi_id(mig)
            gi = self._api.gpu_instance_info(self._api.gpu_instance_by_id(dev, gi_id))
            profile = by_id.get(gi.profile_id)
            out.append(
                MigDevice(
                    uuid=self._api.uuid(mig),
                    parent_uuid=parent,
                    parent_index=parent_index,
                    index=len(out),
                    gi_id=gi_id,
                    ci_id=self._api.ci_id(mig),
                    profile_id=gi.profile_id,
                    profile_name=profile.name if profile else str(gi.profile_id),
                    placement=MigPlacement(gi.start, gi.size),
                    memory_bytes=self._mig_memory(mig, profile),
                    multiprocessor_count=self._mig_multiprocessors(mig, profile),
                )
            )
        return tuple(out)

    def _mig_memory(self, mig: NvmlHandle, profile: MigProfile | None) -> int:
        """The MIG device's memory; its profile's where NVML does not report it."""
        reported = self._optional(lambda: self._api.memory_total(mig))
        if reported is not None:
            return reported
        return profile.memory_bytes if profile else 0

    def _mig_multiprocessors(self, mig: NvmlHandle, profile: MigProfile | None) -> int:
        """The MIG device's own SMs: a GPU instance split into several compute instances
        gives each only its compute instance's share, which NVML reports per MIG device;
        the GPU instance profile's count where the driver lacks the call."""
        attrs = self._optional(lambda: self._api.mig_attributes(mig))
        if attrs is not None:
            return attrs.multiprocessor_count
        return profile.multiprocessor_count if profile else 0

    # -- operations ------------------------------------------------------------------------

    def set_compute_mode(self, gpu_uuid: str, mode: ComputeMode) -> None:
        """``nvmlDeviceSetComputeMode``."""
        with self._op(gpu_uuid, "set_compute_mode"):
            self._api.set_compute_mode(self._device(gpu_uuid), int(mode))

    def persistence_mode(self, gpu_uuid: str) -> bool:
        """``nvmlDeviceGetPersistenceMode``."""
        with self._op(gpu_uuid, "persistence_mode"):
            return self._api.persistence_mode(self._device(gpu_uuid)) == 1

    def set_persistence_mode(self, gpu_uuid: str, *, enabled: bool) -> None:
        """``nvmlDeviceSetPersistenceMode`` (needs root)."""
        with self._op(gpu_uuid, "set_persistence_mode"):
            self._api.set_persistence_mode(self._device(gpu_uuid), 1 if enabled else 0)

    def set_time_slice(self, gpu_uuid: str, level: TimeSliceLevel) -> None:
        """Through ``nvidia-smi compute-policy`` (NVML has no public call for it)."""
        set_timeslice(self._nvidia_smi, gpu_uuid, level=level)

    def set_mig_mode(self, gpu_uuid: str, *, enabled: bool) -> MigModeState:
        """``nvmlDeviceSetMigMode``; returns the (current, pending) state afterwards."""
        with self._op(gpu_uuid, "set_mig_mode"):
            dev = self._device(gpu_uuid)
            self._api.set_mig_mode(dev, 1 if enabled else 0)
            current, pending = self._api.mig_mode(dev)
        return MigModeState(current=bool(current), pending=bool(pending))

    def create_mig_device(
        self, gpu_uuid: str, *, profile_id: int, placement_start: int
    ) -> MigDevice:
        """Create a GI at the placement and a CI spanning it; on CI failure the GI is
        destroyed again so no half-made device is left."""
        op = "create_mig_device"
        info = self.gpu(gpu_uuid)
        try:
            profile = info.mig_profile(profile_id)
        except KeyError as exc:
            if not info.mig_capable:
                raise NotSupportedError(gpu_uuid, op, "GPU has no MIG") from exc
            raise InvalidArgumentError(
                gpu_uuid, op, f"no GPU instance profile id {profile_id}"
            ) from exc
        with self._op(gpu_uuid, op):
            dev = self._device(gpu_uuid)
            gi = self._api.create_gpu_instance(
                dev, profile_id=profile_id, start=placement_start, size=profile.memory_slices
            )
            try:
                ci_profile = self._api.full_ci_profile_id(gi, profile.slice_count)
                self._api.create_compute_instance(gi, ci_profile)
            except NvmlFailure:
                with contextlib.suppress(NvmlFailure):
                    self._api.destroy_gpu_instance(gi)
                raise
            gi_id = self._api.gpu_instance_info(gi).gi_id
        for device in self.gpu(gpu_uuid).mig_devices:
            if device.gi_id == gi_id:
                return device
        raise GpuNotFoundError(gpu_uuid, op, f"created GPU instance {gi_id} is not listed")

    def destroy_mig_device(self, mig_uuid: str) -> None:
        """Destroy every CI of the MIG device's GI, then the GI."""
        op = "destroy_mig_device"
        for info in self.gpus():
            for device in info.mig_devices:
                if device.uuid != mig_uuid:
                    continue
                with self._op(info.uuid, op):
                    dev = self._device(info.uuid)
                    gi = self._api.gpu_instance_by_id(dev, device.gi_id)
                    for ci in self._api.compute_instances(gi):
                        self._api.destroy_compute_instance(ci)
                    self._api.destroy_gpu_instance(gi)
                return
        raise GpuNotFoundError(mig_uuid, op, "no such MIG device")

    def watch_health(self, gpu_uuids: Sequence[str] | None = None) -> HealthWatch:
        """Register XID and ECC events on the GPUs (those supporting them)."""
        uuids = list(gpu_uuids) if gpu_uuids is not None else [g.uuid for g in self.gpus()]
        with self._op("*", "watch_health"):
            event_set = self._api.event_set_create()
        try:
            for uuid in uuids:
                with self._op(uuid, "watch_health"):
                    dev = self._device(uuid)
                    supported = self._supported_events(dev)
                    mask = supported & (EVENT_XID | EVENT_SINGLE_BIT_ECC | EVENT_DOUBLE_BIT_ECC)
                    if mask:
                        self._api.register_events(dev, mask=mask, event_set=event_set)
        except DeviceError:
            with contextlib.suppress(NvmlFailure):
                self._api.event_set_free(event_set)
            raise
        return NvmlHealthWatch(self._api, event_set, uuids=uuids, lock=self._lock)

    def _supported_events(self, dev: NvmlHandle) -> int:
        return self._optional(lambda: self._api.supported_events(dev)) or 0

    def pci_bus(self) -> PciBus:
        """The kernel's bus under the sysfs root; the proc root is scanned for GPU users."""
        return SysfsPciBus(self._sysfs_root, proc_root=self._proc_root)

    def close(self) -> None:
        """``nvmlShutdown`` once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(NvmlFailure):
                self._api.shutdown()
