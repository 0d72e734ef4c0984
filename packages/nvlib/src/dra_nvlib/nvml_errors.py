"""NVML return codes as this package's typed errors, naming the GPU and the operation."""

from __future__ import annotations

from dra_nvlib.errors import (
    DeviceError,
    GpuLostError,
    GpuNotFoundError,
    InsufficientResourcesError,
    InUseError,
    InvalidArgumentError,
    InvalidStateError,
    NoPermissionError,
    NotSupportedError,
    NvmlCallError,
    ResetRequiredError,
)
from dra_nvlib.nvml_api import (
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_IN_USE,
    NVML_ERROR_INSUFFICIENT_RESOURCES,
    NVML_ERROR_INVALID_ARGUMENT,
    NVML_ERROR_INVALID_STATE,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_RESET_REQUIRED,
    NvmlFailure,
)

__all__ = ["translate"]

_ERRORS: dict[int, type[DeviceError]] = {
    NVML_ERROR_INVALID_ARGUMENT: InvalidArgumentError,
    NVML_ERROR_NOT_SUPPORTED: NotSupportedError,
    NVML_ERROR_FUNCTION_NOT_FOUND: NotSupportedError,
    NVML_ERROR_NO_PERMISSION: NoPermissionError,
    NVML_ERROR_NOT_FOUND: GpuNotFoundError,
    NVML_ERROR_GPU_IS_LOST: GpuLostError,
    NVML_ERROR_RESET_REQUIRED: ResetRequiredError,
    NVML_ERROR_IN_USE: InUseError,
    NVML_ERROR_INSUFFICIENT_RESOURCES: InsufficientResourcesError,
    NVML_ERROR_INVALID_STATE: InvalidStateError,
}


def translate(failure: NvmlFailure, *, gpu: str, operation: str) -> DeviceError:
    """The typed error for an NVML failure during ``operation`` on ``gpu``."""
    error = _ERRORS.get(failure.code)
    if error is None:
        return NvmlCallError(gpu, operation, str(failure), code=failure.code)
    return error(gpu, operation, str(failure))
