"""Is there an NVIDIA GPU and driver here? libnvidia-ml loads, nvmlInit succeeds, it counts
at least one device, and the device node exists; otherwise the reason, in words."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

LIBRARY = "libnvidia-ml.so.1"
DEVICE_NODE = Path("/dev/nvidia0")


@dataclass(frozen=True)
class GpuFound:
    """NVML answered with ``count`` GPUs and driver ``driver_version``."""

    count: int
    driver_version: str


def detect_gpu(library: str = LIBRARY, device_node: Path = DEVICE_NODE) -> GpuFound | str:
    """The GPUs NVML sees, or why there are none to check (one short phrase)."""
    try:
        nvml = ctypes.CDLL(library)
    except OSError:
        return f"{library} not found"
    init = getattr(nvml, "nvmlInit_v2", None) or getattr(nvml, "nvmlInit", None)
    if init is None:
        return f"{library} has no nvmlInit"
    status = init()
    if status != 0:
        return f"nvmlInit failed with NVML error {status}"
    try:
        count = ctypes.c_uint(0)
        status = nvml.nvmlDeviceGetCount_v2(ctypes.byref(count))
        if status != 0:
            return f"nvmlDeviceGetCount failed with NVML error {status}"
        if count.value == 0:
            return "NVML reports no GPUs"
        version = ctypes.create_string_buffer(96)
        status = nvml.nvmlSystemGetDriverVersion(version, ctypes.c_uint(96))
        driver = version.value.decode() if status == 0 else "unknown"
    finally:
        nvml.nvmlShutdown()
    if not device_node.exists():
        return f"NVML answers but {device_node} does not exist"
    return GpuFound(count=count.value, driver_version=driver)


def skip_line(reason: str) -> str:
    """The one line printed instead of the check."""
    return f"gpu-check: skipped: no NVIDIA GPU/driver on this machine ({reason})"
