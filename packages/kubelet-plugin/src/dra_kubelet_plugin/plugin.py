"""Wiring: builds every component from :class:`Settings` and runs them until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import yaml
from dra_api_types import ResourceSlice
from dra_nvlib import DeviceLib, DeviceLibConfig, open_device_lib

from dra_kubelet_plugin.cdi_store import CDIStore
from dra_kubelet_plugin.checkpoint import CheckpointStore, read_boot_id
from dra_kubelet_plugin.claim_source import ClaimSource, DirectoryClaimSource, KubeClaimSource
from dra_kubelet_plugin.container_edits import EditsProvider, FakeEdits, NvmlEdits
from dra_kubelet_plugin.dra_service import dra_handlers
from dra_kubelet_plugin.errors import ConfigurationError, KubeApiError
from dra_kubelet_plugin.events import EventRecorder, KubeEventRecorder, LogEventRecorder
from dra_kubelet_plugin.health import ADVERTISED_HEALTH_SERVICES, HealthHub, health_handlers
from dra_kubelet_plugin.health_monitor import HealthMonitor
from dra_kubelet_plugin.healthcheck import HealthcheckServer
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_kubelet_plugin.kube import KubeTransport, path_segment
from dra_kubelet_plugin.metrics import PluginMetrics, serve_metrics
from dra_kubelet_plugin.node_lock import NodeLock
from dra_kubelet_plugin.publisher import SlicePublisher
from dra_kubelet_plugin.registration import RegistrationServer, supported_versions
from dra_kubelet_plugin.settings import DRIVER_NAME, Settings
from dra_kubelet_plugin.slices import SlicePublication, SliceSpec, build_resource_slices
from dra_kubelet_plugin.sockets import (
    SocketPaths,
    bind_unix,
    check_kubelet_dialable,
    remove_stale_socket,
)
from dra_kubelet_plugin.state import DeviceState

__all__ = ["KubeletPlugin", "open_devices", "render_resource_slices"]

log = logging.getLogger(__name__)


def open_devices(settings: Settings) -> DeviceLib:
    """Open the device layer the settings select."""
    state = settings.fake_gpu_state_file
    if settings.device_backend == "fake" and state is None:
        state = settings.plugin_dir / "fake-gpus.json"
        if settings.print_resource_slices and not state.exists():
            # Printing must not create kubelet directories: use the device layer's default.
            state = None
    config = DeviceLibConfig(
        backend="fake" if settings.device_backend == "fake" else "nvml",
        driver_root=settings.container_driver_root or settings.driver_root,
        node_name=settings.node_name,
        fake_fleet=settings.fake_gpus or None,
        fake_state_path=state,
    )
    if state is not None:
        state.parent.mkdir(parents=True, exist_ok=True)
    return open_device_lib(config)


def render_resource_slices(settings: Settings, devices: Sequence[NodeDevice]) -> str:
    """The slices this node would publish, validated, as multi-document YAML."""
    slices = build_resource_slices(
        SliceSpec(driver_name=DRIVER_NAME, node_name=settings.node_name),
        devices,
        generation=1,
        publication=SlicePublication(consumable=settings.consumable_shares),
    )
    docs = [ResourceSlice.from_dict(s, validate=True).to_dict() for s in slices]
    return yaml.safe_dump_all(docs, sort_keys=False)


@dataclass
class KubeletPlugin:
    """The running plugin; :meth:`run` serves until ``stop`` is set."""

    settings: Settings
    metrics: PluginMetrics = field(default_factory=PluginMetrics)
    sockets: SocketPaths | None = None
    state: DeviceState | None = None
    hub: HealthHub | None = None
    healthcheck: HealthcheckServer | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, stop: asyncio.Event) -> None:
        """Start everything, serve until ``stop``, then shut down cleanly."""
        s = self.settings
        lib = await asyncio.to_thread(open_devices, s)
        cleanups: list[Any] = [lib.close]
        try:
            await self._serve(lib, stop, cleanups)
        finally:
            for cleanup in reversed(cleanups):
                with contextlib.suppress(Exception):
                    result = cleanup()
                    if asyncio.iscoroutine(result):
                        await result

    async def _serve(self, lib: DeviceLib, stop: asyncio.Event, cleanups: list[Any]) -> None:
        s = self.settings
        devices = build_inventory(await asyncio.to_thread(lib.gpus))
        transport: KubeTransport | None = None
        node_uid: str | None = None
        claims: ClaimSource
        events: EventRecorder
        if s.claims_directory is not None:
            claims = DirectoryClaimSource(s.claims_directory)
            events = LogEventRecorder(s.node_name)
        else:
            transport = KubeTransport.from_kubeconfig(s.kubeconfig or None)
            cleanups.append(transport.close)
            node_uid = await asyncio.to_thread(_node_uid, transport, s.node_name)
            claims = KubeClaimSource(transport)
            events = KubeEventRecorder(transport, s.node_name, node_uid)
        s.plugin_dir.mkdir(parents=True, exist_ok=True)
        self.sockets = paths = SocketPaths.build(
            driver_name=DRIVER_NAME,
            registrar_dir=s.registrar_dir,
            plugins_dir=s.plugins_dir,
            pod_uid=s.pod_uid or None,
        )
        # Fail before touching any state: a socket the kubelet cannot dial is never registered.
        check_kubelet_dialable(
            paths.registration.absolute(), setting="--kubelet-registrar-directory-path"
        )
        check_kubelet_dialable(paths.dra.resolve(), setting="--kubelet-plugins-directory-path")
        edits: EditsProvider
        if s.device_backend == "fake":
            edits = FakeEdits(s.plugin_dir / "claims")
        else:
            edits = NvmlEdits(
                driver_root=s.driver_root,
                container_driver_root=s.container_driver_root,
                dev_root=s.dev_root,
            )
        self.state = state = DeviceState(
            driver_name=DRIVER_NAME,
            pool_name=s.node_name,
            devices=devices,
            claims=claims,
            checkpoints=CheckpointStore(s.plugin_dir / "checkpoint.json"),
            cdi=CDIStore(s.cdi_root),
            edits=edits,
            lock=NodeLock(s.plugin_dir / "prepare.lock"),
            boot_id=read_boot_id(s.boot_id_file),
            events=events,
            metrics=self.metrics,
        )
        await state.start()
        self.hub = hub = HealthHub(s.node_name)
        await hub.set_devices(d.name for d in devices)

        server = grpc.aio.server()
        handlers = dra_handlers(state, self.metrics, DRIVER_NAME)
        health_on = s.gate("DeviceHealthCheck")
        if health_on:
            handlers += health_handlers(hub)
        server.add_generic_rpc_handlers(tuple(handlers))
        paths.dra.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_socket(paths.dra)
        bind_unix(server, paths.dra.resolve())
        await server.start()
        cleanups.append(lambda: server.stop(grace=5.0))
        log.info("DRA services serving", extra={"event": "dra_serving", "socket": str(paths.dra)})

        monitor = HealthMonitor(
            lib, hub, devices, additional_ignored_xids=s.additional_xids_to_ignore
        )
        if health_on:
            await monitor.open()

        registration = RegistrationServer(
            socket_path=paths.registration,
            driver_name=DRIVER_NAME,
            endpoint=paths.dra.resolve(),
            versions=supported_versions(
                health_services=ADVERTISED_HEALTH_SERVICES if health_on else ()
            ),
        )
        await registration.start()
        # Unregister first on shutdown, so the kubelet stops sending new calls.
        cleanups.append(registration.stop)

        if s.healthcheck_port >= 0:
            self.healthcheck = HealthcheckServer(
                port=s.healthcheck_port, registration=paths.registration, dra=paths.dra
            )
            await self.healthcheck.start()
            cleanups.append(self.healthcheck.stop)
        if s.http_endpoint:
            host, _, port = s.http_endpoint.rpartition(":")
            http_server = serve_metrics(
                self.metrics.registry, host or "0.0.0.0", int(port), s.metrics_path
            )
            cleanups.append(http_server.shutdown)

        tasks: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        inventory = _Inventory(devices)
        publisher: SlicePublisher | None = None
        if transport is not None:
            publisher = SlicePublisher(
                transport=transport,
                spec=SliceSpec(driver_name=DRIVER_NAME, node_name=s.node_name, node_uid=node_uid),
                devices=lambda: inventory.devices,
                health=hub if s.gate("DeviceTaints") else HealthHub(s.node_name),
                metrics=self.metrics,
            )
            tasks.append(loop.create_task(publisher.run(), name="publisher"))
        if health_on:
            cleanups.append(monitor.stop)
            tasks.append(loop.create_task(monitor.run(), name="health-monitor"))
        tasks.append(loop.create_task(self._periodic_cleanup(state), name="stale-cleanup"))

        async def on_change(new: list[NodeDevice]) -> None:
            state.set_devices(new)
            monitor.set_devices(new)
            await hub.set_devices(d.name for d in new)
            if publisher is not None:
                publisher.trigger()

        tasks.append(
            loop.create_task(self._refresh_inventory(lib, inventory, on_change), name="inventory")
        )
        self.ready.set()
        log.info(
            "plugin started",
            extra={
                "event": "started",
                "node": s.node_name,
                "devices": len(devices),
                "backend": s.device_backend,
                "registration_socket": str(paths.registration),
            },
        )
        try:
            await stop.wait()
        finally:
            log.info("shutting down", extra={"event": "stopping"})
            await hub.close()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _refresh_inventory(
        self,
        lib: DeviceLib,
        inventory: _Inventory,
        on_change: Callable[[list[NodeDevice]], Awaitable[None]],
    ) -> None:
        while True:
            await asyncio.sleep(self.settings.device_refresh_interval_s)
            try:
                new = build_inventory(await asyncio.to_thread(lib.gpus))
            except Exception as exc:
                log.error(
                    "GPU enumeration failed",
                    extra={"event": "inventory_failed", "error": str(exc)},
                )
                continue
            if new != inventory.devices:
                log.info(
                    "devices changed",
                    extra={
                        "event": "inventory_changed",
                        "devices": [d.name for d in new],
                    },
                )
                inventory.devices = new
                await on_change(new)

    async def _periodic_cleanup(self, state: DeviceState) -> None:
        while True:
            await asyncio.sleep(self.settings.stale_claim_cleanup_interval_s)
            try:
                await state.cleanup_stale()
            except Exception:
                log.exception("stale claim cleanup failed", extra={"event": "cleanup_failed"})


@dataclass
class _Inventory:
    """The current device list (replaced when the hardware changes)."""

    devices: list[NodeDevice]


def _node_uid(transport: KubeTransport, node_name: str) -> str | None:
    try:
        node = transport.request("GET", f"/api/v1/nodes/{path_segment(node_name)}")
    except KubeApiError as exc:
        if exc.status == 0:
            raise ConfigurationError("--kubeconfig", f"API server unreachable: {exc}") from exc
        log.warning(
            "cannot read the Node; slices will have no owner reference",
            extra={"event": "node_get_failed", "error": str(exc)},
        )
        return None
    meta = node.get("metadata") or {}
    uid = meta.get("uid")
    return uid if isinstance(uid, str) else None
