"""What a ResourceClaim asks of this driver on this node (pure).

Turns a claim read from the API server into the list of devices to prepare, each with the
opaque configuration that applies to it, following the upstream rules:

- only results of this driver count; the response names base requests (``gpu`` for
  ``gpu/large``);
- configs are resolved class configs first, then claim configs, the later one winning, each
  applying to the requests it names (all when it names none; a parent request name covers
  its subrequests); configs of other drivers are ignored;
- ``resource.nvidia.com/v1beta1`` parameters are decoded strictly and a config of the wrong
  type for the device (a MigDeviceConfig on a full GPU) is an error naming both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dra_api_types import (
    DeviceAllocationConfiguration,
    DeviceRequestAllocationResult,
    ResourceClaim,
)

from dra_kubelet_plugin.errors import (
    ClaimNotAllocatedError,
    ClaimNotFoundError,
    ClaimRef,
    DeviceConfigError,
    UnknownDeviceError,
)
from dra_kubelet_plugin.inventory import NodeDevice

__all__ = ["ConfigDecoder", "PlannedDevice", "base_request_name", "plan_claim"]

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


def base_request_name(request: str) -> str:
    """``gpu/large`` -> ``gpu``: the kubelet matches container requests by base name."""
    return request.split("/", 1)[0]


def _applies(config: DeviceAllocationConfiguration, request: str) -> bool:
    if not config.requests:
        return True
    return request in config.requests or base_request_name(request) in config.requests


def plan_claim(
    claim: ResourceClaim,
    ref: ClaimRef,
    *,
    driver_name: str,
    pool_name: str,
    devices: Mapping[str, NodeDevice],
    decode: ConfigDecoder,
) -> list[PlannedDevice]:
    """Return the devices to prepare for ``claim``, in result order.

    Raises:
        ClaimNotFoundError: the claim's UID is not the one the kubelet asked for.
        ClaimNotAllocatedError: no allocation, or no result of this driver.
        UnknownDeviceError: a result names another pool or a device this node lacks.
        DeviceConfigError: an applicable config does not decode or does not fit its device.
    """
    uid = claim.metadata.uid or ""
    if uid != ref.uid:
        raise ClaimNotFoundError(
            ref, f"the API server has UID {uid!r} for this claim", field="metadata.uid"
        )
    allocation = claim.status.allocation
    if allocation is None:
        raise ClaimNotAllocatedError(ref, "claim is not allocated", field="status.allocation")
    results: list[tuple[int, DeviceRequestAllocationResult]] = [
        (i, r) for i, r in enumerate(allocation.devices.results or []) if r.driver == driver_name
    ]
    if not results:
        raise ClaimNotAllocatedError(
            ref,
            f"allocation has no result for driver {driver_name}",
            field="status.allocation.devices.results",
        )
    configs = list(enumerate(allocation.devices.config or []))
    ordered = [c for c in configs if c[1].source == "FromClass"] + [
        c for c in configs if c[1].source != "FromClass"
    ]
    ours = [(i, c) for i, c in ordered if c.opaque is not None and c.opaque.driver == driver_name]
    planned: list[PlannedDevice] = []
    for i, result in results:
        where = f"status.allocation.devices.results[{i}]"
        if result.pool != pool_name:
            raise UnknownDeviceError(
                ref,
                f"pool {result.pool!r} is not this node's pool {pool_name!r}",
                field=f"{where}.pool",
            )
        device = devices.get(result.device)
        if device is None:
            raise UnknownDeviceError(
                ref,
                f"device {result.device!r} does not exist on this node",
                field=f"{where}.device",
            )
        chosen: object | None = None
        chosen_field: str | None = None
        for j, config in ours:
            if not _applies(config, result.request):
                continue
            field = f"status.allocation.devices.config[{j}].opaque.parameters"
            assert config.opaque is not None  # filtered above
            try:
                chosen = decode(config.opaque.parameters or {}, device)
            except ValueError as exc:
                raise DeviceConfigError(
                    ref, f"{exc} (for device {device.name}, request {result.request})", field=field
                ) from exc
            chosen_field = field
        planned.append(
            PlannedDevice(
                request=base_request_name(result.request),
                pool_name=result.pool,
                device=device,
                admin_access=bool(result.admin_access),
                share_id=result.share_id,
                config=chosen,
                config_field=chosen_field,
            )
        )
    return planned
