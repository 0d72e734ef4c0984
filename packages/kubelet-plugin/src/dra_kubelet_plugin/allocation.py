"""What a ResourceClaim asks of this driver on this node (pure).

Turns this driver's allocation results (picked and ordered by the core's
:func:`~dra_kubelet_core.allocated.allocated_devices`) into the list of GPUs to
prepare, each with the opaque configuration that applies to it:

- ``resource.nvidia.com/v1beta1`` parameters are decoded strictly and a config of the wrong
  type for the device (a MigDeviceConfig on a full GPU) is an error naming both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_kubelet_core.allocated import AllocatedDevice
from dra_kubelet_core.errors import ClaimRef, DeviceConfigError, UnknownDeviceError

from dra_kubelet_plugin.inventory import NodeDevice

__all__ = ["ConfigDecoder", "PlannedDevice", "plan_claim"]

#: Decodes opaque parameters into a config object, checks it fits ``device``, and returns it
#: (normalized); raises ``ValueError`` with a message naming the problem.
ConfigDecoder = Callable[[Mapping[str, Any], NodeDevice], object]


@dataclass(frozen=True)
class PlannedDevice:
    """One device of the claim to prepare, with the config that applies (``None``: default)."""

    request: str
    pool_name: str
    device: NodeDevice
    admin_access: bool
    share_id: str | None
    config: object | None
    config_field: str | None


def plan_claim(
    allocated: Sequence[AllocatedDevice],
    ref: ClaimRef,
    *,
    devices: Mapping[str, NodeDevice],
    decode: ConfigDecoder,
) -> list[PlannedDevice]:
    """Return the devices to prepare for this driver's results ``allocated``, in result order
    (``allocated`` comes from :func:`~dra_kubelet_core.allocated.allocated_devices`).

    Raises:
        UnknownDeviceError: a result names a device this node lacks.
        DeviceConfigError: an applicable config does not decode or does not fit its device.
    """
    planned: list[PlannedDevice] = []
    for result in allocated:
        device = devices.get(result.device_name)
        if device is None:
            raise UnknownDeviceError(
                ref,
                f"device {result.device_name!r} does not exist on this node",
                field=f"{result.field}.device",
            )
        chosen: object | None = None
        chosen_field: str | None = None
        for config in result.configs:
            try:
                chosen = decode(config.parameters, device)
            except ValueError as exc:
                raise DeviceConfigError(
                    ref,
                    f"{exc} (for device {device.name}, request {result.full_request})",
                    field=config.field,
                ) from exc
            chosen_field = config.field
        planned.append(
            PlannedDevice(
                request=result.request,
                pool_name=result.pool_name,
                device=device,
                admin_access=result.admin_access,
                share_id=result.share_id,
                config=chosen,
                config_field=chosen_field,
            )
        )
    return planned
