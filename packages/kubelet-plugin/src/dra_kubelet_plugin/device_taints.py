"""The GPU plugin's device taint keys (put on unhealthy devices in its ResourceSlices)."""

from __future__ import annotations

__all__ = ["TAINT_GPU_LOST", "TAINT_UNMONITORED", "TAINT_XID"]

TAINT_XID = "gpu.nvidia.com/xid"
TAINT_GPU_LOST = "gpu.nvidia.com/gpu-lost"
#: Health events cannot be watched: the device's health is unknown (effect ``None``, as NVIDIA).
TAINT_UNMONITORED = "gpu.nvidia.com/unmonitored"
