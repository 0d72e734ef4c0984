"""Backend selection: :func:`open_device_lib` opens the backend a :class:`DeviceLibConfig` names.

It sits above both backends (and the config they read), so nothing below imports it.
"""

from __future__ import annotations

from dra_nvlib.config import DeviceLibConfig
from dra_nvlib.devicelib import DeviceLib
from dra_nvlib.fake_backend import FakeDeviceLib
from dra_nvlib.nvml_backend import NvmlDeviceLib

__all__ = ["open_device_lib"]


def open_device_lib(config: DeviceLibConfig) -> DeviceLib:
    """Open the backend ``config`` selects; close it (or use ``with``) when done."""
    if config.backend == "fake" and config.fake_state_store == "memory" and config.fake_fleet:
        return FakeDeviceLib.in_memory(fleet=config.fake_fleet, node_name=config.node_name)
    if config.backend == "fake":
        return FakeDeviceLib.open(
            state_path=config.state_path,
            fleet=config.fake_fleet,
            node_name=config.node_name,
        )
    return NvmlDeviceLib.open(config)
