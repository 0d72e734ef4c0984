"""The GPU plugin's device taint keys (put on unhealthy devices in its ResourceSlices), and
the taint of GPUs the enumeration reports lost (pure)."""

from __future__ import annotations

from collections.abc import Iterable

from dra_api_types import GPU_DRIVER
from dra_kubelet_core.health import DeviceHealth

from dra_kubelet_plugin.inventory import NodeDevice

__all__ = ["TAINT_GPU_LOST", "TAINT_UNMONITORED", "TAINT_XID", "lost_gpu_health"]

TAINT_XID = f"{GPU_DRIVER}/xid"
TAINT_GPU_LOST = f"{GPU_DRIVER}/gpu-lost"
#: Health events cannot be watched: the device's health is unknown (effect ``None``, as NVIDIA).
TAINT_UNMONITORED = f"{GPU_DRIVER}/unmonitored"


def lost_gpu_health(devices: Iterable[NodeDevice]) -> dict[str, DeviceHealth]:
    """The ``gpu-lost`` health of every device whose GPU the enumeration flags lost, by
    device name (a GPU that fell off the bus after this process first listed it)."""
    return {
        d.name: DeviceHealth(
            device_name=d.name,
            healthy=False,
            message=lost_message(d.gpu.uuid),
            taint_key=TAINT_GPU_LOST,
        )
        for d in devices
        if d.gpu.lost
    }


def lost_message(gpu_uuid: str) -> str:
    """The health message of a lost GPU's devices."""
    return f"GPU {gpu_uuid} fell off the bus"
