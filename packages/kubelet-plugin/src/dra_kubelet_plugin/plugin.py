"""The GPU plugin's wiring: the core runner's steps plus GPU enumeration and health monitoring."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from dra_api_types import ResourceSlice
from dra_kube_client import JsonTransport, KubeApiError
from dra_kubelet_core.errors import ConfigurationError, PluginError
from dra_kubelet_core.health import HealthHub
from dra_kubelet_core.healthcheck import HealthcheckServer
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.runner import PluginRunner
from dra_kubelet_core.sockets import SocketPaths
from dra_kubelet_core.state import ClaimEngine
from dra_nvlib import DeviceLib
from dra_sharing import (
    DynamicMig,
    MpsDaemonManager,
    MpsLauncher,
    SharingGates,
    SharingManager,
    TimeSlicer,
)

from dra_kubelet_plugin.backend import GpuBackend, open_backend
from dra_kubelet_plugin.device_metadata import MetadataFiles
from dra_kubelet_plugin.device_taints import lost_gpu_health
from dra_kubelet_plugin.gpu_driver import GpuDriver, GpuPlan, gpu_identity
from dra_kubelet_plugin.gpu_sharing import GpuSharing, MpsOrphans
from dra_kubelet_plugin.health_monitor import HealthMonitor, mark_lost_gpus
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_kubelet_plugin.partition_attributes import PartitionAttributes
from dra_kubelet_plugin.partition_claims import PartitionClaims
from dra_kubelet_plugin.passthrough_claims import PassthroughClaims
from dra_kubelet_plugin.passthrough_devices import Passthrough
from dra_kubelet_plugin.settings import DRIVER_NAME, Settings
from dra_kubelet_plugin.slices import (
    SlicePublication,
    SliceSpec,
    build_resource_slices,
    gpu_slice_source,
)

__all__ = [
    "KubeletPlugin",
    "enumerate_devices",
    "open_partitions",
    "open_passthrough",
    "open_sharing",
    "publication_of",
    "publishable",
    "render_resource_slices",
]

log = logging.getLogger(__name__)


def render_resource_slices(
    settings: Settings,
    devices: Sequence[NodeDevice],
    partitions: PartitionClaims | None = None,
) -> str:
    """The slices this node would publish, validated, as multi-document YAML: the devices of a
    lost GPU tainted ``gpu-lost`` (left out with gate ``DeviceTaints`` off)."""
    taints = settings.gate("DeviceTaints")
    slices = build_resource_slices(
        SliceSpec(driver_name=DRIVER_NAME, node_name=settings.node_name),
        publishable(devices, taints=taints),
        generation=1,
        health=lost_gpu_health(devices) if taints else None,
        publication=publication_of(settings, partitions=partitions),
    )
    docs = [ResourceSlice.from_dict(s, validate=True).to_dict() for s in slices]
    import yaml  # deferred import: only this one-shot command writes YAML (docs/scale.md)

    return yaml.safe_dump_all(docs, sort_keys=False)


def publishable(devices: Sequence[NodeDevice], *, taints: bool) -> list[NodeDevice]:
    """The devices to put in slices: all of them with ``taints`` (a lost GPU's are tainted
    ``gpu-lost``), else those of GPUs that are not lost (no taint could keep pods away)."""
    return [d for d in devices if taints or not d.gpu.lost]


def publication_of(
    settings: Settings, *, split_counters: bool = True, partitions: PartitionClaims | None = None
) -> SlicePublication:
    """How the settings share devices in the slices (``split_counters``: Kubernetes 1.35+);
    with gate ``FabricManagerPartitioning`` the GPUs' module IDs and, where the node has a
    Fabric Manager (``partitions``), their partitions."""
    fabric: PartitionAttributes | None = None
    if settings.gate("FabricManagerPartitioning"):
        fabric = partitions.attributes if partitions is not None else PartitionAttributes()
    return SlicePublication(
        consumable=settings.consumable_shares,
        split_counters=split_counters,
        list_attributes=settings.gate("DRAListTypeAttributes"),
        partitions=fabric,
    )


def open_partitions(settings: Settings, backend: GpuBackend) -> PartitionClaims | None:
    """The node's Fabric Manager partitions with gate ``FabricManagerPartitioning`` (else,
    and on a node without an NVSwitch fabric, ``None``).

    Raises:
        FabricManagerError: Fabric Manager cannot be reached or lists malformed partitions
            (the plugin does not start, as NVIDIA's does not).
    """
    if not settings.gate("FabricManagerPartitioning"):
        return None
    manager = backend.fabric_manager()
    return PartitionClaims(manager) if manager is not None else None


def open_sharing(
    settings: Settings, backend: GpuBackend, transport: JsonTransport | None = None
) -> GpuSharing:
    """Time-slicing, MPS daemons (below ``<plugin dir>/mps``) and dynamic MIG as the gates
    select, on the backend's GPUs. MPS daemons run as Deployments where the backend chose
    that and the plugin has an API client (``transport``); start-up recovery then also
    deletes the daemon Deployments of claims no longer prepared."""
    lib = backend.lib
    mps: MpsDaemonManager | None = None
    orphans: MpsOrphans | None = None
    if settings.gate("MPSSupport"):
        launcher: MpsLauncher = backend.mps_launcher
        if backend.mps_deployment is not None:
            if transport is None:
                raise ConfigurationError(
                    "--mps-daemon-launcher", "deployment needs the API server (no kubeconfig)"
                )
            # Recovery deletes the Deployments of claims no longer prepared through it.
            launcher = orphans = backend.mps_deployment(transport)
        mps = MpsDaemonManager(settings.plugin_dir / "mps", lib=lib, launcher=launcher)
    manager = SharingManager(
        time_slicer=TimeSlicer(lib),
        mps=mps,
        dynamic_mig=DynamicMig(lib) if settings.gate("DynamicMIG") else None,
    )
    gates = SharingGates(
        time_slicing=settings.gate("TimeSlicingSettings"), mps=settings.gate("MPSSupport")
    )
    return GpuSharing(lib=lib, manager=manager, gates=gates, edits=backend.edits, orphans=orphans)


def _split_counters(runner: PluginRunner) -> bool:
    """Kubernetes 1.35+ takes counter sets in slices of their own; 1.34 next to devices."""
    if runner.transport is None:
        return True
    try:
        version = runner.transport.request("GET", "/version")
        major, minor = int(version["major"]), int(str(version["minor"]).rstrip("+"))
    except (PluginError, KubeApiError, KeyError, TypeError, ValueError):
        return True
    return (major, minor) >= (1, 35)


@dataclass
class KubeletPlugin:
    """The running plugin; :meth:`run` serves until ``stop`` is set."""

    settings: Settings
    metrics: PluginMetrics = field(default_factory=PluginMetrics)
    sockets: SocketPaths | None = None
    state: ClaimEngine[GpuPlan] | None = None
    hub: HealthHub | None = None
    healthcheck: HealthcheckServer | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self, stop: asyncio.Event) -> None:
        """Start everything, serve until ``stop``, then shut down cleanly."""
        backend = await asyncio.to_thread(open_backend, self.settings)
        try:
            async with PluginRunner(
                self.settings, gpu_identity(DRIVER_NAME), self.metrics
            ) as runner:
                await self._serve(backend, runner, stop)
        finally:
            with contextlib.suppress(Exception):
                backend.lib.close()

    async def _serve(self, backend: GpuBackend, runner: PluginRunner, stop: asyncio.Event) -> None:
        s = self.settings
        lib = backend.lib
        passthrough = await asyncio.to_thread(open_passthrough, s, backend)
        partitions = await asyncio.to_thread(open_partitions, s, backend)
        devices = await asyncio.to_thread(
            enumerate_devices, lib, passthrough, dynamic_mig=s.gate("DynamicMIG")
        )
        await runner.connect()
        self.sockets = paths = runner.sockets
        assert paths is not None  # set by connect()
        # The engine is the core's; the driver stays here to take the refreshed devices.
        gpus = GpuDriver(
            driver_name=DRIVER_NAME,
            devices=devices,
            edits=backend.edits,
            passthrough=passthrough,
            sharing=open_sharing(s, backend, runner.transport),
            partitions=partitions,
        )
        self.state = state = runner.engine(gpus)
        await state.start()
        self.hub = hub = HealthHub(s.node_name)
        await hub.set_devices(d.name for d in devices)
        await mark_lost_gpus(hub, devices)

        health_on = s.gate("DeviceHealthCheck")
        await runner.serve_dra(state, health=hub if health_on else None)
        monitor = HealthMonitor(
            lib,
            hub,
            devices,
            additional_ignored_xids=s.additional_xids_to_ignore,
            xid_recovery_s=s.health_recovery_period_s,
        )
        if health_on:
            await monitor.open()
        await runner.register()
        await runner.serve_endpoints()
        self.healthcheck = runner.healthcheck

        inventory = _Inventory(devices)
        spec = SliceSpec(driver_name=DRIVER_NAME, node_name=s.node_name, node_uid=runner.node_uid)
        taints_on = s.gate("DeviceTaints")
        taints = hub if taints_on else HealthHub(s.node_name)

        def published() -> list[NodeDevice]:
            devices = publishable(inventory.devices, taints=taints_on)
            # A prepared device's twin (gpu-N / gpu-vfio-M: one GPU) is left out.
            if passthrough is None:
                return devices
            return passthrough.visible(devices)

        publication = publication_of(
            s,
            split_counters=await asyncio.to_thread(_split_counters, runner),
            partitions=partitions,
        )
        publisher = runner.publish(
            gpu_slice_source(spec, published, taints, publication), health=taints
        )
        if passthrough is not None and publisher is not None:
            passthrough.on_change = publisher.trigger
        if health_on:
            runner.on_stop(monitor.stop)
            runner.task(monitor.run(), name="health-monitor")
        runner.cleanup_periodically(state)

        async def on_change(new: list[NodeDevice]) -> None:
            gpus.set_devices(new)
            monitor.set_devices(new)
            await hub.set_devices(d.name for d in new)
            await mark_lost_gpus(hub, new)
            if publisher is not None:
                publisher.trigger()

        runner.task(
            self._refresh_inventory(lib, passthrough, inventory, on_change), name="inventory"
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
        await runner.wait(stop, health=hub)

    async def _refresh_inventory(
        self,
        lib: DeviceLib,
        passthrough: PassthroughClaims | None,
        inventory: _Inventory,
        on_change: Callable[[list[NodeDevice]], Awaitable[None]],
    ) -> None:
        while True:
            await asyncio.sleep(self.settings.device_refresh_interval_s)
            try:
                new = await asyncio.to_thread(
                    enumerate_devices,
                    lib,
                    passthrough,
                    dynamic_mig=self.settings.gate("DynamicMIG"),
                )
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


def open_passthrough(settings: Settings, backend: GpuBackend) -> PassthroughClaims | None:
    """The passthrough part of the driver with gate ``PassthroughSupport`` (else ``None``);
    KEP-5304 metadata files with ``DeviceMetadata``."""
    if not settings.gate("PassthroughSupport"):
        return None
    bus = Passthrough(backend.lib.pci_bus(), host=backend.host, lib=backend.lib)
    metadata = MetadataFiles(settings.plugin_dir, driver=DRIVER_NAME)
    return PassthroughClaims(
        bus,
        driver_name=DRIVER_NAME,
        metadata=metadata if settings.gate("DeviceMetadata") else None,
    )


def enumerate_devices(
    lib: DeviceLib, passthrough: PassthroughClaims | None, *, dynamic_mig: bool = False
) -> list[NodeDevice]:
    """The node's devices: GPUs and MIG devices (with ``dynamic_mig``, gate ``DynamicMIG``, the
    MIG placements of MIG-capable GPUs), plus ``gpu-vfio-M`` with passthrough."""
    gpus = lib.gpus()
    devices = build_inventory(gpus, dynamic_mig=dynamic_mig)
    if passthrough is not None:
        devices += passthrough.passthrough.devices(gpus)
    return devices


@dataclass
class _Inventory:
    """The current device list (replaced when the hardware changes)."""

    devices: list[NodeDevice]
