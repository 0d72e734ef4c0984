"""The allocation results of one driver in a ResourceClaim, with their opaque configs (pure).

Follows the upstream rules every DRA driver applies:

- the claim's UID must be the one the kubelet asked for, and it must be allocated;
- only results of this driver count, and only in this node's pool; the response names base
  requests (``gpu`` for ``gpu/large``);
- configs apply class configs first, then claim configs, the later one winning, each applying
  to the requests it names (all when it names none; a parent request name covers its
  subrequests); configs of other drivers are ignored.

Decoding the opaque parameters is the driver's business (:mod:`.driver`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dra_api_types import (
    DeviceAllocationConfiguration,
    DeviceRequestAllocationResult,
    ResourceClaim,
)

from dra_kubelet_core.errors import (
    ClaimNotAllocatedError,
    ClaimNotFoundError,
    ClaimRef,
    UnknownDeviceError,
)

__all__ = ["AllocatedDevice", "OpaqueConfig", "allocated_devices", "base_request_name"]


@dataclass(frozen=True)
class OpaqueConfig:
    """The opaque parameters of one config of this driver, and the field naming them."""

    parameters: Mapping[str, Any]
    field: str


@dataclass(frozen=True)
class AllocatedDevice:
    """One allocation result of this driver: where it is in the claim and what applies to it.

    ``configs`` are the opaque configs of this driver that apply to the result's request, in
    precedence order (the last one wins).
    """

    index: int
    request: str
    full_request: str
    pool_name: str
    device_name: str
    admin_access: bool
    share_id: str | None
    configs: tuple[OpaqueConfig, ...]

    @property
    def field(self) -> str:
        """The field path of this result in the claim (for error messages)."""
        return f"status.allocation.devices.results[{self.index}]"


def base_request_name(request: str) -> str:
    """``gpu/large`` -> ``gpu``: the kubelet matches container requests by base name."""
    return request.split("/", 1)[0]


def _applies(config: DeviceAllocationConfiguration, request: str) -> bool:
    if not config.requests:
        return True
    return request in config.requests or base_request_name(request) in config.requests


def allocated_devices(
    claim: ResourceClaim, ref: ClaimRef, *, driver_name: str, pool_name: str
) -> list[AllocatedDevice]:
    """Return this driver's results of ``claim``, in result order.

    Raises:
        ClaimNotFoundError: the claim's UID is not the one the kubelet asked for.
        ClaimNotAllocatedError: no allocation, or no result of this driver.
        UnknownDeviceError: a result names another pool than this node's.
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
    out: list[AllocatedDevice] = []
    for i, result in results:
        if result.pool != pool_name:
            raise UnknownDeviceError(
                ref,
                f"pool {result.pool!r} is not this node's pool {pool_name!r}",
                field=f"status.allocation.devices.results[{i}].pool",
            )
        applicable = tuple(
            OpaqueConfig(
                parameters=(config.opaque.parameters or {}) if config.opaque else {},
                field=f"status.allocation.devices.config[{j}].opaque.parameters",
            )
            for j, config in ours
            if _applies(config, result.request)
        )
        out.append(
            AllocatedDevice(
                index=i,
                request=base_request_name(result.request),
                full_request=result.request,
                pool_name=result.pool,
                device_name=result.device,
                admin_access=bool(result.admin_access),
                share_id=result.share_id,
                configs=applicable,
            )
        )
    return out
