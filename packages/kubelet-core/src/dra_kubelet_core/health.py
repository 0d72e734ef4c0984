"""Device health: the state hub, the kubelet's DRAResourceHealth stream, and device taints.

Health events from the device layer mark devices unhealthy; the hub keeps the complete
picture, so every message on the stream lists every device (as the kubelet expects) and the
ResourceSlice publisher turns unhealthy devices into taints.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

import grpc
import grpc.aio

from dra_kubelet_core._proto import dra_health_v1_pb2, dra_health_v1alpha1_pb2

__all__ = [
    "ADVERTISED_HEALTH_SERVICES",
    "HEALTH_SERVICE_NAMES",
    "DeviceHealth",
    "HealthHub",
    "health_handlers",
    "stream_status",
]

log = logging.getLogger(__name__)

_PACKAGES: dict[str, ModuleType] = {
    "v1alpha1": dra_health_v1alpha1_pb2,
    "v1": dra_health_v1_pb2,
}
#: Health services served on the DRA socket, by their registration names.
HEALTH_SERVICE_NAMES = [f"{v}.DRAResourceHealth" for v in _PACKAGES]
#: What registration advertises: the kubelet releases with DRA health (1.34-1.36) know only
#: v1alpha1; v1 (kubelet 1.37 development) is served too but not advertised yet.
ADVERTISED_HEALTH_SERVICES = ["v1alpha1.DRAResourceHealth"]


@dataclass(frozen=True)
class DeviceHealth:
    """Health of one published device.

    ``taint_key``/``taint_value`` say which device taint (the driver's key) the unhealthy
    state maps to; ``unknown`` means the health is not monitored (``UNKNOWN`` on the stream).
    """

    device_name: str
    healthy: bool = True
    message: str = ""
    updated_at: int = 0
    taint_key: str | None = None
    taint_value: str | None = None
    unknown: bool = False


class HealthHub:
    """Complete, versioned health state of the node's devices, with change notification."""

    def __init__(self, pool_name: str) -> None:
        """Track devices of pool ``pool_name``."""
        self.pool_name = pool_name
        self._devices: dict[str, DeviceHealth] = {}
        self._version = 0
        self._closed = False
        self._changed = asyncio.Condition()

    @property
    def version(self) -> int:
        """Increases on every change."""
        return self._version

    def snapshot(self) -> list[DeviceHealth]:
        """Every device's health, ordered by device name."""
        return [self._devices[k] for k in sorted(self._devices)]

    def get(self, device_name: str) -> DeviceHealth | None:
        """Health of one device, if tracked."""
        return self._devices.get(device_name)

    async def set_devices(self, names: Iterable[str]) -> None:
        """Track exactly ``names``: new ones start healthy, known ones keep their state."""
        now = int(time.time())
        new = {n: self._devices.get(n, DeviceHealth(device_name=n, updated_at=now)) for n in names}
        if new != self._devices:
            self._devices = new
            await self._notify()

    async def mark_unhealthy(
        self,
        device_name: str,
        *,
        message: str,
        taint_key: str,
        taint_value: str | None = None,
        unknown: bool = False,
    ) -> None:
        """Mark a device unhealthy (idempotent), or of ``unknown`` health (not monitored);
        devices the hub does not track are ignored with a log line."""
        current = self._devices.get(device_name)
        if current is None:
            log.warning(
                "health event for an unknown device",
                extra={"event": "health_unknown_device", "device": device_name},
            )
            return
        updated = replace(
            current,
            healthy=False,
            message=message,
            updated_at=int(time.time()),
            taint_key=taint_key,
            taint_value=taint_value,
            unknown=unknown,
        )
        if updated != current:
            self._devices[device_name] = updated
            log.warning(
                "device unhealthy",
                extra={"event": "device_unhealthy", "device": device_name, "reason": message},
            )
            await self._notify()

    async def mark_healthy(self, device_name: str) -> None:
        """Clear a device's unhealthy state."""
        current = self._devices.get(device_name)
        if current is not None and not current.healthy:
            self._devices[device_name] = DeviceHealth(
                device_name=device_name, updated_at=int(time.time())
            )
            await self._notify()

    async def _notify(self) -> None:
        async with self._changed:
            self._version += 1
            self._changed.notify_all()

    async def close(self) -> None:
        """End every :meth:`watch` (shutdown), so open kubelet streams finish at once."""
        self._closed = True
        await self._notify()

    async def wait_for_change(self, seen_version: int) -> int:
        """Wait until the version differs from ``seen_version``; return the new version."""
        async with self._changed:
            await self._changed.wait_for(lambda: self._version != seen_version)
            return self._version

    async def watch(self) -> AsyncIterator[list[DeviceHealth]]:
        """Yield the full state now and after every change, until :meth:`close`."""
        version = self._version
        while not self._closed:
            yield self.snapshot()
            version = await self.wait_for_change(version)


def health_handlers(hub: HealthHub) -> list[grpc.GenericRpcHandler[Any, Any]]:
    """Return handlers for the v1alpha1 and v1 DRAResourceHealth services."""
    handlers = []
    for version, pb in _PACKAGES.items():
        handlers.append(
            grpc.method_handlers_generic_handler(
                f"{version}.DRAResourceHealth",
                {
                    "NodeWatchResources": grpc.unary_stream_rpc_method_handler(
                        _watch(hub, pb),
                        request_deserializer=pb.NodeWatchResourcesRequest.FromString,
                        response_serializer=pb.NodeWatchResourcesResponse.SerializeToString,
                    )
                },
            )
        )
    return handlers


def _watch(hub: HealthHub, pb: ModuleType) -> Any:
    async def handle(
        _request: Any, _context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        log.info("kubelet watches device health", extra={"event": "health_watch_started"})
        async for devices in hub.watch():
            yield pb.NodeWatchResourcesResponse(
                devices=[
                    pb.DeviceHealth(
                        device=pb.DeviceIdentifier(
                            pool_name=hub.pool_name, device_name=d.device_name
                        ),
                        health=stream_status(pb, d),
                        last_updated_time=d.updated_at,
                        message=d.message,
                    )
                    for d in devices
                ]
            )

    return handle


def stream_status(pb: ModuleType, health: DeviceHealth) -> Any:
    """The health stream's status of a device (module ``pb`` of the served API version):
    HEALTHY, UNHEALTHY, or UNKNOWN for a device whose health is not monitored."""
    if health.healthy:
        return pb.HEALTHY
    if health.unknown:
        return pb.UNKNOWN
    return pb.UNHEALTHY
