"""GPU discovery and control on NVML, plus a faithful fake GPU fleet.

Open a backend by configuration and work with immutable facts::

    from dra_nvlib import DeviceLibConfig, open_device_lib

    with open_device_lib(DeviceLibConfig(backend="fake", node_name="n1",
                                         fake_fleet="8xH100-80GB")) as lib:
        for gpu in lib.gpus():
            print(gpu.index, gpu.uuid, gpu.product_name)
"""

from dra_nvlib.config import (
    BACKENDS,
    ENV_BACKEND,
    ENV_DRIVER_ROOT,
    ENV_FAKE_FLEET,
    ENV_FAKE_STATE,
    ENV_NODE_NAME,
    ENV_NVIDIA_SMI,
    ENV_SYSFS_ROOT,
    BackendName,
    DeviceLibConfig,
    open_device_lib,
)
from dra_nvlib.devicelib import DeviceLib, HealthWatch
from dra_nvlib.errors import (
    ConfigError,
    DeviceError,
    FakeStateError,
    FleetSpecError,
    GpuLostError,
    GpuNotFoundError,
    InsufficientResourcesError,
    InUseError,
    InvalidArgumentError,
    InvalidStateError,
    LibraryLoadError,
    NoPermissionError,
    NotSupportedError,
    NvlibError,
    NvmlCallError,
    PlacementConflictError,
    ResetRequiredError,
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
    HealthEvent,
    HealthEventKind,
    MigDevice,
    MigModeState,
    MigPlacement,
    MigProfile,
    TimeSliceLevel,
)
from dra_nvlib.fake_backend import FakeDeviceLib, FakeHealthWatch, FaultKind
from dra_nvlib.fleet import FleetEntry, FleetSpec, load_fleet_spec, parse_fleet_string
from dra_nvlib.nvidia_smi import render_nvidia_smi_list, render_nvidia_smi_script
from dra_nvlib.profiles import GPU_MODELS, GpuModel, MigProfileSpec, find_model

__all__ = [
    "BACKENDS",
    "ENV_BACKEND",
    "ENV_DRIVER_ROOT",
    "ENV_FAKE_FLEET",
    "ENV_FAKE_STATE",
    "ENV_NODE_NAME",
    "ENV_NVIDIA_SMI",
    "ENV_SYSFS_ROOT",
    "GPU_MODELS",
    "AddressingMode",
    "Architecture",
    "BackendName",
    "Brand",
    "ComputeMode",
    "ConfigError",
    "CudaComputeCapability",
    "DeviceError",
    "DeviceLib",
    "DeviceLibConfig",
    "DriverInfo",
    "FabricInfo",
    "FabricState",
    "FakeDeviceLib",
    "FakeHealthWatch",
    "FakeStateError",
    "FaultKind",
    "FleetEntry",
    "FleetSpec",
    "FleetSpecError",
    "GpuInfo",
    "GpuLostError",
    "GpuModel",
    "GpuNotFoundError",
    "HealthEvent",
    "HealthEventKind",
    "HealthWatch",
    "InUseError",
    "InsufficientResourcesError",
    "InvalidArgumentError",
    "InvalidStateError",
    "LibraryLoadError",
    "MigDevice",
    "MigModeState",
    "MigPlacement",
    "MigProfile",
    "MigProfileSpec",
    "NoPermissionError",
    "NotSupportedError",
    "NvlibError",
    "NvmlCallError",
    "PlacementConflictError",
    "ResetRequiredError",
    "TimeSliceLevel",
    "find_model",
    "load_fleet_spec",
    "open_device_lib",
    "parse_fleet_string",
    "render_nvidia_smi_list",
    "render_nvidia_smi_script",
]
