"""Decoding of ``resource.nvidia.com/v1beta1`` opaque configs for a device (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dra_api_types import (
    GpuConfig,
    MigDeviceConfig,
    ValidationError,
    VfioDeviceConfig,
    decode_opaque_config,
)

from dra_kubelet_plugin.inventory import DeviceType, NodeDevice

__all__ = ["DeviceConfig", "decode_device_config", "sharing_of"]

DeviceConfig = GpuConfig | MigDeviceConfig | VfioDeviceConfig
_EXPECTED: dict[DeviceType, type[GpuConfig] | type[MigDeviceConfig] | type[VfioDeviceConfig]] = {
    DeviceType.GPU: GpuConfig,
    DeviceType.MIG: MigDeviceConfig,
    DeviceType.VFIO: VfioDeviceConfig,
}


def decode_device_config(parameters: Mapping[str, Any], device: NodeDevice) -> DeviceConfig:
    """Strictly decode and validate ``parameters`` and check the config fits ``device``.

    Raises:
        ValueError: unknown apiVersion/kind/field, a rule broken, or a config of the wrong
            type for the device (the message names both).
    """
    try:
        config = decode_opaque_config(parameters)
    except ValidationError as exc:
        raise ValueError(f"invalid {exc}") from exc
    expected = _EXPECTED[device.type]
    if not isinstance(config, expected):
        raise ValueError(
            f"{type(config).__name__} cannot configure {device.type.value} device "
            f"{device.name}; a {device.type.value} device takes {expected.__name__}"
        )
    return config


def sharing_of(config: object) -> str | None:
    """The sharing strategy a user explicitly asked for, or ``None``."""
    if isinstance(config, GpuConfig | MigDeviceConfig) and config.sharing is not None:
        return config.sharing.strategy or "unspecified"
    return None
