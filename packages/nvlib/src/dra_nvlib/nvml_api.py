"""The typed surface of NVML the backend uses: :class:`NvmlApi`, its handles, codes and records.

Nothing here loads NVML; :mod:`dra_nvlib.nvml_binding` implements the protocol over ``pynvml``
and tests implement it with scripted fakes. Every failing call raises :class:`NvmlFailure`
carrying the NVML return code; the backend turns that into a typed error naming the GPU and
operation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType, Protocol

NvmlHandle = NewType("NvmlHandle", object)
GiHandle = NewType("GiHandle", object)
CiHandle = NewType("CiHandle", object)
EventSetHandle = NewType("EventSetHandle", object)

# NVML return codes the backend branches on.
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_INVALID_STATE = 29

# nvmlInitWithFlags: succeed on a node without GPUs (NVIDIA's driver initialises with it).
NVML_INIT_FLAG_NO_GPUS = 0x1

EVENT_SINGLE_BIT_ECC = 0x1
EVENT_DOUBLE_BIT_ECC = 0x2
EVENT_XID = 0x8

# NVML_GPU_INSTANCE_PROFILE_* indices queried during enumeration (COUNT is 0x12 in 13.x).
GI_PROFILE_INDICES = tuple(range(0x12))
CI_PROFILE_INDICES = tuple(range(0x9))


class NvmlFailure(Exception):
    """An NVML call returned ``code``; ``function`` is the NVML function name."""

    def __init__(self, function: str, code: int, message: str) -> None:
        self.function = function
        self.code = code
        super().__init__(f"{function}: {message} (NVML return code {code})")


@dataclass(frozen=True)
class RawGiProfile:
    """``nvmlGpuInstanceProfileInfo_v2``."""

    profile_id: int
    name: str
    slice_count: int
    instance_count: int
    multiprocessor_count: int
    copy_engine_count: int
    decoder_count: int
    encoder_count: int
    jpeg_count: int
    ofa_count: int
    memory_mib: int


@dataclass(frozen=True)
class RawGiInfo:
    """``nvmlGpuInstanceInfo``."""

    gi_id: int
    profile_id: int
    start: int
    size: int


@dataclass(frozen=True)
class RawMigAttributes:
    """``nvmlDeviceAttributes_t`` of a MIG device: its compute instance's share."""

    multiprocessor_count: int
    gi_slice_count: int
    ci_slice_count: int
    memory_mib: int


@dataclass(frozen=True)
class RawFabric:
    """``nvmlGpuFabricInfo``."""

    cluster_uuid: bytes
    clique_id: int
    state: int
    status: int
    health_mask: int


@dataclass(frozen=True)
class RawEvent:
    """``nvmlEventData``; ``gpu_uuid`` resolved from the event's device handle."""

    gpu_uuid: str
    event_type: int
    event_data: int
    gi_id: int
    ci_id: int


class NvmlApi(Protocol):
    """Typed NVML surface used by the backend."""

    def init(self) -> None:
        """Load the NVML library and initialise it."""

    def shutdown(self) -> None:
        """``nvmlShutdown`` (reference counted by NVML)."""

    def reload(self) -> None:
        """Shut NVML down, unload the library and load it again from its path (after a
        driver reload or upgrade replaced it), then initialise."""

    def driver_version(self) -> str:
        """``nvmlSystemGetDriverVersion``."""

    def cuda_driver_version(self) -> int:
        """``nvmlSystemGetCudaDriverVersion`` (e.g. 12040)."""

    def nvml_version(self) -> str:
        """``nvmlSystemGetNVMLVersion``."""

    def device_count(self) -> int:
        """``nvmlDeviceGetCount``."""

    def device_by_index(self, index: int) -> NvmlHandle:
        """``nvmlDeviceGetHandleByIndex``."""

    def device_by_uuid(self, uuid: str) -> NvmlHandle:
        """``nvmlDeviceGetHandleByUUID``."""

    def uuid(self, dev: NvmlHandle) -> str:
        """``nvmlDeviceGetUUID``."""

    def name(self, dev: NvmlHandle) -> str:
        """``nvmlDeviceGetName``."""

    def brand(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetBrand``."""

    def architecture(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetArchitecture``."""

    def cuda_compute_capability(self, dev: NvmlHandle) -> tuple[int, int]:
        """``nvmlDeviceGetCudaComputeCapability``."""

    def minor_number(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetMinorNumber``."""

    def memory_total(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetMemoryInfo().total`` in bytes."""

    def pci_bus_id(self, dev: NvmlHandle) -> str:
        """``nvmlDeviceGetPciInfo().busId`` (``00000000:07:00.0``)."""

    def addressing_mode(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetAddressingMode`` (NVML 12.570+)."""

    def module_id(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetModuleId``: the GPU's module on its baseboard."""

    def mig_mode(self, dev: NvmlHandle) -> tuple[int, int]:
        """``nvmlDeviceGetMigMode``: (current, pending)."""

    def compute_mode(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetComputeMode``."""

    def fabric_info(self, dev: NvmlHandle) -> RawFabric:
        """``nvmlDeviceGetGpuFabricInfoV`` (v2), falling back to the v1 call."""

    def gi_profile_info(self, dev: NvmlHandle, profile_index: int) -> RawGiProfile:
        """``nvmlDeviceGetGpuInstanceProfileInfoV``."""

    def gi_placements(self, dev: NvmlHandle, profile_id: int) -> list[tuple[int, int]]:
        """``nvmlDeviceGetGpuInstancePossiblePlacements_v2``."""

    def max_mig_device_count(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetMaxMigDeviceCount``."""

    def mig_device_by_index(self, dev: NvmlHandle, index: int) -> NvmlHandle:
        """``nvmlDeviceGetMigDeviceHandleByIndex``."""

    def gi_id(self, mig: NvmlHandle) -> int:
        """``nvmlDeviceGetGpuInstanceId``."""

    def mig_attributes(self, mig: NvmlHandle) -> RawMigAttributes:
        """``nvmlDeviceGetAttributes_v2`` (MIG device handles only)."""

    def ci_id(self, mig: NvmlHandle) -> int:
        """``nvmlDeviceGetComputeInstanceId``."""

    def gpu_instance_by_id(self, dev: NvmlHandle, gi_id: int) -> GiHandle:
        """``nvmlDeviceGetGpuInstanceById``."""

    def gpu_instance_info(self, gi: GiHandle) -> RawGiInfo:
        """``nvmlGpuInstanceGetInfo``."""

    def set_compute_mode(self, dev: NvmlHandle, mode: int) -> None:
        """``nvmlDeviceSetComputeMode``."""

    def persistence_mode(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetPersistenceMode`` (1: enabled)."""

    def set_persistence_mode(self, dev: NvmlHandle, mode: int) -> None:
        """``nvmlDeviceSetPersistenceMode``."""

    def set_mig_mode(self, dev: NvmlHandle, mode: int) -> int:
        """``nvmlDeviceSetMigMode``; returns the activation status code."""

    def create_gpu_instance(
        self, dev: NvmlHandle, *, profile_id: int, start: int, size: int
    ) -> GiHandle:
        """``nvmlDeviceCreateGpuInstanceWithPlacement``."""

    def full_ci_profile_id(self, gi: GiHandle, slice_count: int) -> int:
        """Id of the compute-instance profile spanning the whole GI (``slice_count`` slices)."""

    def create_compute_instance(self, gi: GiHandle, ci_profile_id: int) -> CiHandle:
        """``nvmlGpuInstanceCreateComputeInstance``."""

    def compute_instances(self, gi: GiHandle) -> list[CiHandle]:
        """Every compute instance of the GI, across CI profiles."""

    def destroy_compute_instance(self, ci: CiHandle) -> None:
        """``nvmlComputeInstanceDestroy``."""

    def destroy_gpu_instance(self, gi: GiHandle) -> None:
        """``nvmlGpuInstanceDestroy``."""

    def event_set_create(self) -> EventSetHandle:
        """``nvmlEventSetCreate``."""

    def register_events(self, dev: NvmlHandle, *, mask: int, event_set: EventSetHandle) -> None:
        """``nvmlDeviceRegisterEvents``."""

    def supported_events(self, dev: NvmlHandle) -> int:
        """``nvmlDeviceGetSupportedEventTypes``."""

    def event_wait(self, event_set: EventSetHandle, timeout_ms: int) -> RawEvent | None:
        """``nvmlEventSetWait_v2``; ``None`` on timeout."""

    def event_set_free(self, event_set: EventSetHandle) -> None:
        """``nvmlEventSetFree``."""
