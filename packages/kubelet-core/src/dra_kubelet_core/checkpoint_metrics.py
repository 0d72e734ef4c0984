"""The metrics that follow the checkpoint, set after every checkpoint write (and at start).

Prepared claims and devices (ours and NVIDIA's ``nvidia_dra_prepared_devices``) and the
per-pod ``nvidia_dra_device_allocation_info`` rows are all derived from the checkpoint just
written, so they agree with it, survive a restart and drop a claim with its unprepare.
"""

from __future__ import annotations

from typing import Any

from dra_kubelet_core.allocation_info import allocation_rows
from dra_kubelet_core.checkpoint import Checkpoint, count_prepared_devices
from dra_kubelet_core.driver import Driver
from dra_kubelet_core.metrics import PluginMetrics

__all__ = ["publish_checkpoint"]


def publish_checkpoint(
    metrics: PluginMetrics, checkpoint: Checkpoint, driver: Driver[Any], *, pool_name: str
) -> None:
    """Set the checkpoint's metrics; ``pool_name`` is the node (one pool per node, named
    after it)."""
    driver_name = driver.identity.name
    metrics.prepared_claims.set(len(checkpoint.claims))
    metrics.prepared_devices.set(sum(len(c.devices) for c in checkpoint.claims.values()))
    metrics.set_prepared_devices(
        pool_name, driver_name, count_prepared_devices(checkpoint, driver.device_type)
    )
    metrics.set_allocation_info(
        allocation_rows(
            checkpoint, node=pool_name, driver=driver_name, identify=driver.device_identity
        )
    )
