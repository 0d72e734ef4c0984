"""The GPU plugin's device taint keys (put on unhealthy devices in its ResourceSlices)."""

from __future__ import annotations

from dra_api_types import GPU_DRIVER

__all__ = ["TAINT_GPU_LOST", "TAINT_UNMONITORED", "TAINT_XID"]

TAINT_XID = f"{GPU_DRIVER}/xid"
TAINT_GPU_LOST = f"{GPU_DRIVER}/gpu-lost"
#: Health events cannot be watched: the device's health is unknown (effect ``None``, as NVIDIA).
TAINT_UNMONITORED = f"{GPU_DRIVER}/unmonitored"
