"""Exceptions raised by dra_nvlib.

Every error names the GPU (UUID or index) and the operation it concerns, so a caller can log
or return it per claim without parsing messages.

Exception tree::

    NvlibError                      base of everything raised here
    ├── ConfigError                 bad DeviceLibConfig / environment (names the field)
    ├── FleetSpecError              unparsable fake fleet spec or profile YAML (names the item)
    ├── FakeStateError              unreadable/incompatible fake state file
    ├── LibraryLoadError            libnvidia-ml.so.1 not found / not loadable under driverRoot
    ├── FabricManagerError          a Fabric Manager partition is unknown, busy or malformed
    │   └── FabricManagerUnavailableError  Fabric Manager cannot be reached (libnvfm)
    └── DeviceError                 an operation on one GPU failed (gpu, operation)
        ├── NotSupportedError       the GPU or driver does not support the operation/query
        ├── GpuNotFoundError        no GPU with that UUID/index/MIG UUID
        ├── GpuLostError            the GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)
        ├── NoPermissionError       the caller lacks the privilege (NVML_ERROR_NO_PERMISSION)
        ├── InvalidArgumentError    bad argument (profile id, placement, mode...)
        ├── InvalidStateError       not allowed in the GPU's current state (e.g. MIG disabled)
        ├── InUseError              resource busy (NVML_ERROR_IN_USE)
        ├── InsufficientResourcesError  no capacity left (NVML_ERROR_INSUFFICIENT_RESOURCES)
        │   └── PlacementConflictError  placement overlaps an existing GPU instance
        ├── ResetRequiredError      change is pending until the GPU is reset
        ├── NvmlCallError           any other NVML return code (carries the code)
        └── PassthroughError        a vfio-pci bind/unbind cannot be done (``gpu`` is the BDF)
            ├── IommuUnavailableError   no IOMMU, or the GPU has no IOMMU group
            ├── IommuGroupError         the group holds a device that is not ours
            └── DriverBindError         the kernel did not bind the driver we asked for
"""

from __future__ import annotations


class NvlibError(Exception):
    """Base class of every exception raised by dra_nvlib."""


class ConfigError(NvlibError):
    """Invalid configuration; ``field`` names the offending setting."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"invalid device-lib config {field}: {message}")


class FleetSpecError(NvlibError):
    """A fake fleet spec string or profile YAML could not be understood."""

    def __init__(self, spec: str, message: str) -> None:
        self.spec = spec
        super().__init__(f"invalid fake GPU fleet spec {spec!r}: {message}")


class FakeStateError(NvlibError):
    """The fake backend's state file is unreadable or belongs to another node/fleet."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"fake GPU state {path}: {message}")


class FabricManagerError(NvlibError):
    """Fabric Manager refused or cannot serve a partition request (names the partition)."""

    def __init__(self, partition: int | None, operation: str, message: str) -> None:
        self.partition = partition
        self.operation = operation
        where = f"partition {partition}" if partition is not None else "partitions"
        super().__init__(f"Fabric Manager {where}: {operation}: {message}")


class FabricManagerUnavailableError(FabricManagerError):
    """Fabric Manager cannot be reached (not running, or no binding to ``libnvfm``)."""

    def __init__(self, message: str) -> None:
        super().__init__(None, "connect", message)


class LibraryLoadError(NvlibError):
    """The NVML shared library could not be loaded or initialised."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(f"cannot load NVML from {path}: {message}")


class DeviceError(NvlibError):
    """An operation on one GPU failed.

    ``gpu`` is the GPU's UUID (or index/MIG UUID when that is what the caller passed);
    ``operation`` is the name of the DeviceLib method or query (``"create_mig_device"``,
    ``"get_fabric_info"``...).
    """

    def __init__(self, gpu: str, operation: str, message: str) -> None:
        self.gpu = gpu
        self.operation = operation
        self.detail = message
        super().__init__(f"GPU {gpu}: {operation}: {message}")


class NotSupportedError(DeviceError):
    """The GPU, its architecture or the driver does not support this operation.

    Callers treat this as a capability answer ("this GPU cannot do that"), not a failure.
    """


class GpuNotFoundError(DeviceError):
    """No GPU (or MIG device) matches the identifier."""


class GpuLostError(DeviceError):
    """The GPU is lost (fell off the bus or needs a reset); it must not be allocated."""


class NoPermissionError(DeviceError):
    """The process lacks the privilege for this operation (usually needs root)."""


class InvalidArgumentError(DeviceError):
    """An argument (profile id, placement, mode, level) is not valid for this GPU."""


class InvalidStateError(DeviceError):
    """The operation is not allowed in the GPU's current state (e.g. MIG mode disabled)."""


class InUseError(DeviceError):
    """The resource is in use (e.g. destroying a GPU instance that still has compute instances
    with running processes, or toggling MIG mode while processes run)."""


class InsufficientResourcesError(DeviceError):
    """No capacity left for this profile (instance count or memory slices exhausted)."""


class PlacementConflictError(InsufficientResourcesError):
    """The requested placement overlaps an existing GPU instance."""


class ResetRequiredError(DeviceError):
    """The change was accepted but takes effect only after a GPU reset."""


class NvmlCallError(DeviceError):
    """An NVML call returned an error code not mapped to a more specific exception."""

    def __init__(self, gpu: str, operation: str, message: str, *, code: int) -> None:
        self.code = code
        super().__init__(gpu, operation, f"{message} (NVML return code {code})")


class PassthroughError(DeviceError):
    """A passthrough (``vfio-pci``) operation on a GPU cannot be done; ``gpu`` is its PCI
    address (``0000:07:00.0``), which is all a GPU bound to ``vfio-pci`` still has."""


class IommuUnavailableError(PassthroughError):
    """The node has no IOMMU (or the GPU sits in no IOMMU group): no passthrough at all."""


class IommuGroupError(PassthroughError):
    """The GPU's IOMMU group holds a device that is not ours (or not released), so handing
    the group to a VM would hand that device too."""


class DriverBindError(PassthroughError):
    """After an unbind/bind the kernel did not attach the driver we asked for."""
