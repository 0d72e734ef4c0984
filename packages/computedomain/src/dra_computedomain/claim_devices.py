"""The ``compute-domain.nvidia.com`` devices of a claim and their configs (pure).

This node publishes two devices, ``daemon-0`` (an IMEX daemon slot) and ``channel-0`` (an
IMEX channel). A claim's results of this driver each get the last matching
``ComputeDomainDaemonConfig`` or ``ComputeDomainChannelConfig`` (class configs first, then
the claim's, as for every DRA driver); the controller's templates always carry one, so a
result without is an error, and so is a config of the wrong kind for its device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dra_api_types import (
    COMPUTE_DOMAIN_DRIVER,
    ComputeDomainChannelConfig,
    ComputeDomainDaemonConfig,
    ResourceClaim,
    ValidationError,
    decode_opaque_config,
)

from .errors import ClaimConfigError

__all__ = [
    "CHANNEL_DEVICE",
    "DAEMON_DEVICE",
    "ClaimDevice",
    "claim_devices",
    "slice_devices",
]

DAEMON_DEVICE = "daemon-0"
CHANNEL_DEVICE = "channel-0"


def slice_devices(*, daemons: bool = True) -> list[dict[str, Any]]:
    """The devices of this node's ``compute-domain.nvidia.com`` ResourceSlice (``daemons``
    False: host-managed IMEX, no daemon slot)."""
    channel = {
        "name": CHANNEL_DEVICE,
        "attributes": {"type": {"string": "channel"}, "id": {"int": 0}},
    }
    if not daemons:
        return [channel]
    return [
        {"name": DAEMON_DEVICE, "attributes": {"type": {"string": "daemon"}, "id": {"int": 0}}},
        channel,
    ]


@dataclass(frozen=True)
class ClaimDevice:
    """One allocated device of this driver with its config."""

    request: str
    device: str
    config: ComputeDomainChannelConfig | ComputeDomainDaemonConfig


def claim_devices(claim: ResourceClaim, *, pool: str) -> list[ClaimDevice]:
    """This node's devices of ``claim``, each with its (normalized) config.

    Raises:
        ClaimConfigError: not allocated, another pool, an unknown device, a missing or
            invalid config, or one of the wrong kind (naming the field).
    """
    ref = f"{claim.metadata.namespace}/{claim.metadata.name}"
    allocation = claim.status.allocation
    if allocation is None:
        raise ClaimConfigError(ref, "status.allocation: not allocated")
    configs = list(enumerate(allocation.devices.config or []))
    ordered = [c for c in configs if c[1].source == "FromClass"] + [
        c for c in configs if c[1].source != "FromClass"
    ]
    out: list[ClaimDevice] = []
    for i, result in enumerate(allocation.devices.results or []):
        if result.driver != COMPUTE_DOMAIN_DRIVER:
            continue
        where = f"status.allocation.devices.results[{i}]"
        if result.pool != pool:
            raise ClaimConfigError(ref, f"{where}.pool: {result.pool!r} is not this node's")
        expected: type[ComputeDomainChannelConfig] | type[ComputeDomainDaemonConfig]
        if result.device == CHANNEL_DEVICE:
            expected = ComputeDomainChannelConfig
        elif result.device == DAEMON_DEVICE:
            expected = ComputeDomainDaemonConfig
        else:
            raise ClaimConfigError(ref, f"{where}.device: unknown device {result.device!r}")
        base = result.request.split("/", 1)[0]
        chosen: ComputeDomainChannelConfig | ComputeDomainDaemonConfig | None = None
        for j, config in ordered:
            if config.opaque is None or config.opaque.driver != COMPUTE_DOMAIN_DRIVER:
                continue
            if config.requests and not {result.request, base} & set(config.requests):
                continue
            field = f"status.allocation.devices.config[{j}].opaque.parameters"
            try:
                decoded = decode_opaque_config(config.opaque.parameters or {})
            except ValidationError as exc:
                raise ClaimConfigError(ref, f"{field}: {exc}") from exc
            if not isinstance(decoded, expected):
                raise ClaimConfigError(
                    ref,
                    f"{field}: {type(decoded).__name__} cannot configure {result.device} "
                    f"(it takes {expected.__name__})",
                )
            chosen = decoded.normalize()
        if chosen is None:
            raise ClaimConfigError(
                ref, f"{where}: no {expected.__name__} applies to device {result.device}"
            )
        out.append(ClaimDevice(request=base, device=result.device, config=chosen))
    if not out:
        raise ClaimConfigError(ref, f"status.allocation: no result of {COMPUTE_DOMAIN_DRIVER}")
    return out
