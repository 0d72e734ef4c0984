"""The only module that imports ``pynvml`` (from the ``nvidia-ml-py`` distribution).

``pynvml`` is untyped; :class:`PynvmlApi` implements the typed
:class:`~dra_nvlib.nvml_api.NvmlApi` the NVML backend uses, returning plain Python
values, and raises :class:`~dra_nvlib.nvml_api.NvmlFailure` for every failing call.
"""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
from pathlib import Path
from typing import Any

from dra_nvlib.errors import LibraryLoadError
from dra_nvlib.nvml_api import (
    CI_PROFILE_INDICES,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_TIMEOUT,
    NVML_INIT_FLAG_NO_GPUS,
    CiHandle,
    EventSetHandle,
    GiHandle,
    NvmlFailure,
    NvmlHandle,
    RawEvent,
    RawFabric,
    RawGiInfo,
    RawGiProfile,
    RawMigAttributes,
)

# Library directories under a driver root, in the order the NVIDIA container toolkit searches.
LIBRARY_DIRS = (
    "usr/lib64",
    "usr/lib/x86_64-linux-gnu",
    "usr/lib/aarch64-linux-gnu",
    "lib64",
    "lib/x86_64-linux-gnu",
    "lib/aarch64-linux-gnu",
    "usr/lib",
    "lib",
)
LIBRARY_NAME = "libnvidia-ml.so.1"


def find_library(driver_root: Path) -> Path:
    """``libnvidia-ml.so.1`` under ``driver_root``; LibraryLoadError listing where it looked."""
    tried = [driver_root / d / LIBRARY_NAME for d in LIBRARY_DIRS]
    for path in tried:
        if path.exists():
            return path
    raise LibraryLoadError(str(driver_root), "not found in " + ", ".join(str(p) for p in tried))


def _pynvml() -> Any:
    """The ``pynvml`` module, imported on first use: it holds every NVML structure and costs
    ~6 MB of RSS at import, which a node on the fake backend (or a command that never opens
    NVML) should not pay (docs/scale.md, "Per-node footprint")."""
    import pynvml  # type: ignore[import-untyped]  # deferred import

    return pynvml


def has_binding(name: str) -> bool:
    """True when the installed ``nvidia-ml-py`` provides ``name`` (function or struct)."""
    return getattr(_pynvml(), name, None) is not None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PynvmlApi:
    """:class:`NvmlApi` over ``pynvml``, bound to one shared library file.

    ``pynvml`` keeps the loaded library in a module global, so one process talks to one
    ``libnvidia-ml.so.1``; opening a different path while another is loaded is refused.
    """

    def __init__(self, library: Path) -> None:
        self.library = library

    def _call(self, function: str, *args: Any) -> Any:
        try:
            return getattr(_pynvml(), function)(*args)
        except _pynvml().NVMLError as exc:
            raise NvmlFailure(function, int(exc.value), str(exc)) from exc

    def init(self) -> None:
        """Load the library from ``self.library`` and initialise NVML."""
        loaded = getattr(_pynvml(), "nvmlLib", None)
        current = getattr(loaded, "_name", None)
        if loaded is not None and current != str(self.library):
            raise LibraryLoadError(
                str(self.library), f"this process already loaded NVML from {current}"
            )
        if loaded is None:
            try:
                _pynvml().nvmlLib = ctypes.CDLL(str(self.library))
            except OSError as exc:
                raise LibraryLoadError(str(self.library), str(exc)) from exc
        # pynvml's nvmlInit is nvmlInitWithFlags(0): a node whose GPUs are all gone (or not
        # yet probed) would fail here and the plugin crash-loop instead of publishing none.
        self._call("nvmlInitWithFlags", NVML_INIT_FLAG_NO_GPUS)

    def shutdown(self) -> None:
        """``nvmlShutdown`` (reference counted by NVML)."""
        self._call("nvmlShutdown")

    def reload(self) -> None:
        """See :meth:`NvmlApi.reload`: pynvml's function cache is dropped with the library,
        so no pointer into the old mapping survives."""
        with contextlib.suppress(NvmlFailure):
            self._call("nvmlShutdown")
        loaded = getattr(_pynvml(), "nvmlLib", None)
        if loaded is not None:
            handle = getattr(loaded, "_handle", None)
            _pynvml().nvmlLib = None
            cache = getattr(_pynvml(), "_nvmlGetFunctionPointer_cache", None)
            if isinstance(cache, dict):
                cache.clear()
            if handle:
                with contextlib.suppress(OSError):
                    _ctypes.dlclose(handle)
        self.init()

    def driver_version(self) -> str:
        """``nvmlSystemGetDriverVersion``."""
        return _text(self._call("nvmlSystemGetDriverVersion"))

    def cuda_driver_version(self) -> int:
        """``nvmlSystemGetCudaDriverVersion`` (e.g. 12040)."""
        return int(self._call("nvmlSystemGetCudaDriverVersion"))

    def nvml_version(self) -> str:
        """``nvmlSystemGetNVMLVersion``."""
        return _text(self._call("nvmlSystemGetNVMLVersion"))

    def device_count(self) -> int:
        """``nvmlDeviceGetCount``."""
        return int(self._call("nvmlDeviceGetCount"))

    def device_by_index(self, index: int) -> NvmlHandle:
        """``nvmlDeviceGetHandleByIndex``."""
        return NvmlHandle(self._call("nvmlDeviceGetHandleByIndex", index))

    def device_by_uuid(self, uuid: str) -> NvmlHandle:
        """``nvmlDeviceGetHandleByUUID``."""
        return NvmlHandle(self._call("nvmlDeviceGetHandleByUUID", uuid.encode()))

    def uuid(self, dev: NvmlHandle) -> str:
        """``nvmlDeviceGetUUID``."""
        return _text(self._call("nvmlDeviceGetUUID", dev))

    def name(self, dev: NvmlHandle) -> str:
        """``nvmlDeviceGetName``."""
        return _text(self._call("nvmlDeviceGetName", dev))

    def brand(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetBrand``."""
        return int(self._call("nvmlDeviceGetBrand", dev))

    def architecture(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetArchitecture``."""
        return int(self._call("nvmlDeviceGetArchitecture", dev))

    def cuda_compute_capability(self, dev: NvmlHandle) -> tuple[int, int]:
        """``nvmlDeviceGetCudaComputeCapability``."""
        major, minor = self._call("nvmlDeviceGetCudaComputeCapability", dev)
        return int(major), int(minor)

    def minor_number(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetMinorNumber``."""
        return int(self._call("nvmlDeviceGetMinorNumber", dev))

    def memory_total(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetMemoryInfo().total`` in bytes."""
        return int(self._call("nvmlDeviceGetMemoryInfo", dev).total)

    def pci_bus_id(self, dev: NvmlHandle) -> str:
        """``nvmlDeviceGetPciInfo().busId`` (``00000000:07:00.0``)."""
        return _text(self._call("nvmlDeviceGetPciInfo", dev).busId)

    def addressing_mode(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetAddressingMode`` (NVML 12.570+)."""
        return int(self._call("nvmlDeviceGetAddressingMode", dev))

    def module_id(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetModuleId``: the GPU's module on its baseboard (Fabric Manager's
        partition member id)."""
        # A fresh out-parameter: pynvml's default argument is one object shared by threads.
        return int(self._call("nvmlDeviceGetModuleId", dev, ctypes.c_uint()))

    def mig_mode(self, dev: NvmlHandle) -> tuple[int, int]:
        """``nvmlDeviceGetMigMode``: (current, pending)."""
        current, pending = self._call("nvmlDeviceGetMigMode", dev)
        return int(current), int(pending)

    def compute_mode(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetComputeMode``."""
        return int(self._call("nvmlDeviceGetComputeMode", dev))

    def fabric_info(self, dev: NvmlHandle) -> RawFabric:
        """``nvmlDeviceGetGpuFabricInfoV`` (v2), falling back to the v1 call."""
        try:
            info: Any = _pynvml().c_nvmlGpuFabricInfo_v2_t()
            self._call("nvmlDeviceGetGpuFabricInfoV", dev, ctypes.byref(info))
            health = int(info.healthMask)
        except NvmlFailure as exc:
            if exc.code not in (
                NVML_ERROR_FUNCTION_NOT_FOUND,
                NVML_ERROR_ARGUMENT_VERSION_MISMATCH,
            ):
                raise
            info = _pynvml().c_nvmlGpuFabricInfo_t()
            self._call("nvmlDeviceGetGpuFabricInfo", dev, ctypes.byref(info))
            health = 0
        return RawFabric(
            cluster_uuid=bytes(info.clusterUuid),
            clique_id=int(info.cliqueId),
            state=int(info.state),
            status=int(info.status),
            health_mask=health,
        )

    def gi_profile_info(self, dev: NvmlHandle, profile_index: int) -> RawGiProfile:
        """``nvmlDeviceGetGpuInstanceProfileInfoV``."""
        info = self._call("nvmlDeviceGetGpuInstanceProfileInfo", dev, profile_index)
        return RawGiProfile(
            profile_id=int(info.id),
            name=_text(getattr(info, "name", b"")),
            slice_count=int(info.sliceCount),
            instance_count=int(info.instanceCount),
            multiprocessor_count=int(info.multiprocessorCount),
            copy_engine_count=int(info.copyEngineCount),
            decoder_count=int(info.decoderCount),
            encoder_count=int(info.encoderCount),
            jpeg_count=int(info.jpegCount),
            ofa_count=int(info.ofaCount),
            memory_mib=int(info.memorySizeMB),
        )

    def gi_placements(self, dev: NvmlHandle, profile_id: int) -> list[tuple[int, int]]:
        """``nvmlDeviceGetGpuInstancePossiblePlacements_v2``."""
        placements = (_pynvml().c_nvmlGpuInstancePlacement_t * 16)()
        count = ctypes.c_uint(16)
        self._call(
            "nvmlDeviceGetGpuInstancePossiblePlacements",
            dev,
            profile_id,
            placements,
            ctypes.byref(count),
        )
        return [(int(p.start), int(p.size)) for p in placements[: count.value]]

    def max_mig_device_count(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetMaxMigDeviceCount``."""
        return int(self._call("nvmlDeviceGetMaxMigDeviceCount", dev))

    def mig_device_by_index(self, dev: NvmlHandle, index: int) -> NvmlHandle:
        """``nvmlDeviceGetMigDeviceHandleByIndex``."""
        return NvmlHandle(self._call("nvmlDeviceGetMigDeviceHandleByIndex", dev, index))

    def gi_id(self, mig: NvmlHandle) -> int:
        """``nvmlDeviceGetGpuInstanceId``."""
        return int(self._call("nvmlDeviceGetGpuInstanceId", mig))

    def ci_id(self, mig: NvmlHandle) -> int:
        """``nvmlDeviceGetComputeInstanceId``."""
        return int(self._call("nvmlDeviceGetComputeInstanceId", mig))

    def mig_attributes(self, mig: NvmlHandle) -> RawMigAttributes:
        """``nvmlDeviceGetAttributes_v2`` (MIG device handles only)."""
        attrs = self._call("nvmlDeviceGetAttributes_v2", mig)
        return RawMigAttributes(
            multiprocessor_count=int(attrs.multiprocessorCount),
            gi_slice_count=int(attrs.gpuInstanceSliceCount),
            ci_slice_count=int(attrs.computeInstanceSliceCount),
            memory_mib=int(attrs.memorySizeMB),
        )

    def gpu_instance_by_id(self, dev: NvmlHandle, gi_id: int) -> GiHandle:
        """``nvmlDeviceGetGpuInstanceById``."""
        return GiHandle(self._call("nvmlDeviceGetGpuInstanceById", dev, gi_id))

    def gpu_instance_info(self, gi: GiHandle) -> RawGiInfo:
        """``nvmlGpuInstanceGetInfo``."""
        info = self._call("nvmlGpuInstanceGetInfo", gi)
        return RawGiInfo(
            gi_id=int(info.id),
            profile_id=int(info.profileId),
            start=int(info.placement.start),
            size=int(info.placement.size),
        )

    def set_compute_mode(self, dev: NvmlHandle, mode: int) -> None:
        """``nvmlDeviceSetComputeMode``."""
        self._call("nvmlDeviceSetComputeMode", dev, mode)

    def persistence_mode(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetPersistenceMode`` (1: enabled)."""
        return int(self._call("nvmlDeviceGetPersistenceMode", dev))

    def set_persistence_mode(self, dev: NvmlHandle, mode: int) -> None:
        """``nvmlDeviceSetPersistenceMode``."""
        self._call("nvmlDeviceSetPersistenceMode", dev, mode)

    def set_mig_mode(self, dev: NvmlHandle, mode: int) -> int:
        """``nvmlDeviceSetMigMode``; returns the activation status code."""
        return int(self._call("nvmlDeviceSetMigMode", dev, mode))

    def create_gpu_instance(
        self, dev: NvmlHandle, *, profile_id: int, start: int, size: int
    ) -> GiHandle:
        """``nvmlDeviceCreateGpuInstanceWithPlacement``."""
        placement = _pynvml().c_nvmlGpuInstancePlacement_t()
        placement.start = start
        placement.size = size
        return GiHandle(
            self._call(
                "nvmlDeviceCreateGpuInstanceWithPlacement", dev, profile_id, ctypes.byref(placement)
            )
        )

    def full_ci_profile_id(self, gi: GiHandle, slice_count: int) -> int:
        """Id of the compute-instance profile spanning the whole GI (``slice_count`` slices)."""
        for index in CI_PROFILE_INDICES:
            try:
                info = self._call("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi, index, 0)
            except NvmlFailure as exc:
                if exc.code in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT):
                    continue
                raise
            if int(info.sliceCount) == slice_count:
                return int(info.id)
        raise NvmlFailure(
            "nvmlGpuInstanceGetComputeInstanceProfileInfo",
            NVML_ERROR_NOT_SUPPORTED,
            f"no compute-instance profile with {slice_count} slice(s)",
        )

    def create_compute_instance(self, gi: GiHandle, ci_profile_id: int) -> CiHandle:
        """``nvmlGpuInstanceCreateComputeInstance``."""
        return CiHandle(self._call("nvmlGpuInstanceCreateComputeInstance", gi, ci_profile_id))

    def compute_instances(self, gi: GiHandle) -> list[CiHandle]:
        """Every compute instance of the GI, across CI profiles."""
        out: list[CiHandle] = []
        for index in CI_PROFILE_INDICES:
            try:
                info = self._call("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi, index, 0)
            except NvmlFailure as exc:
                if exc.code in (NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT):
                    continue
                raise
            handles = (_pynvml().c_nvmlComputeInstance_t * 8)()
            count = ctypes.c_uint(0)
            self._call(
                "nvmlGpuInstanceGetComputeInstances", gi, int(info.id), handles, ctypes.byref(count)
            )
            out.extend(CiHandle(handles[i]) for i in range(count.value))
        return out

    def destroy_compute_instance(self, ci: CiHandle) -> None:
        """``nvmlComputeInstanceDestroy``."""
        self._call("nvmlComputeInstanceDestroy", ci)

    def destroy_gpu_instance(self, gi: GiHandle) -> None:
        """``nvmlGpuInstanceDestroy``."""
        self._call("nvmlGpuInstanceDestroy", gi)

    def event_set_create(self) -> EventSetHandle:
        """``nvmlEventSetCreate``."""
        return EventSetHandle(self._call("nvmlEventSetCreate"))

    def supported_events(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetSupportedEventTypes``."""
        return int(self._call("nvmlDeviceGetSupportedEventTypes", dev))

    def register_events(self, dev: NvmlHandle, *, mask: int, event_set: EventSetHandle) -> None:
        """``nvmlDeviceRegisterEvents``."""
        self._call("nvmlDeviceRegisterEvents", dev, mask, event_set)

    def event_wait(self, event_set: EventSetHandle, timeout_ms: int) -> RawEvent | None:
        """``nvmlEventSetWait_v2``; ``None`` on timeout."""
        try:
            data = self._call("nvmlEventSetWait_v2", event_set, timeout_ms)
        except NvmlFailure as exc:
            if exc.code == NVML_ERROR_TIMEOUT:
                return None
            raise
        return RawEvent(
            gpu_uuid=_text(self._call("nvmlDeviceGetUUID", data.device)),
            event_type=int(data.eventType),
            event_data=int(data.eventData),
            gi_id=int(data.gpuInstanceId),
            ci_id=int(data.computeInstanceId),
        )

    def event_set_free(self, event_set: EventSetHandle) -> None:
        """``nvmlEventSetFree``."""
        self._call("nvmlEventSetFree", event_set)
