"""Runs ``nvidia-smi`` for what NVML does not expose: the time-slice compute policy."""

from __future__ import annotations

import subprocess
from pathlib import Path

from dra_nvlib.errors import (
    DeviceError,
    GpuLostError,
    GpuNotFoundError,
    InvalidArgumentError,
    NoPermissionError,
    NotSupportedError,
    NvmlCallError,
)
from dra_nvlib.facts import TimeSliceLevel

# nvidia-smi exits with the NVML return code of the failing call.
_EXIT_ERRORS: dict[int, type[DeviceError]] = {
    2: InvalidArgumentError,
    3: NotSupportedError,
    4: NoPermissionError,
    6: GpuNotFoundError,
    15: GpuLostError,
}


def set_timeslice(nvidia_smi: Path, gpu_uuid: str, *, level: TimeSliceLevel) -> None:
    """``nvidia-smi compute-policy -i <uuid> --set-timeslice=<level>``."""
    operation = "set_time_slice"
    argv = [str(nvidia_smi), "compute-policy", "-i", gpu_uuid, f"--set-timeslice={int(level)}"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    except FileNotFoundError as exc:
        raise NotSupportedError(gpu_uuid, operation, f"{nvidia_smi} not found") from exc
    except subprocess.TimeoutExpired as exc:
        raise NvmlCallError(gpu_uuid, operation, "nvidia-smi timed out", code=10) from exc
    if proc.returncode == 0:
        return
    message = (proc.stderr or proc.stdout).strip() or f"nvidia-smi exited {proc.returncode}"
    error = _EXIT_ERRORS.get(proc.returncode)
    if error is not None:
        raise error(gpu_uuid, operation, message)
    raise NvmlCallError(gpu_uuid, operation, message, code=proc.returncode)
