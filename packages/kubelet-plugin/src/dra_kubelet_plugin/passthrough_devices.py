"""Passthrough GPUs on this node (gate ``PassthroughSupport``): the ``gpu-vfio-M`` devices,
and the driver switch behind preparing one.

Preparing a ``vfio`` device hands its GPU to ``vfio-pci`` (after waiting until no process
uses it, and checking its IOMMU group: :func:`dra_nvlib.bind_vfio`) and gives the container
the VFIO nodes its ``VfioDeviceConfig`` asks for; unpreparing gives the GPU back to
``nvidia``. A GPU is never left bound to neither driver: a bind that does not take is rolled
back, and :meth:`Passthrough.recover` (at start) gives every driverless GPU, and every GPU on
``vfio-pci`` that no checkpointed claim holds, back to ``nvidia``.

Exclusion between the twins ``gpu-N`` and ``gpu-vfio-M`` (one piece of silicon) is by
removing the sibling from the slice while one is prepared, as NVIDIA's driver does, not by
shared counters: with real GPUs NVML stops listing a GPU once ``vfio-pci`` holds it, so a
``gpu-N`` kept in the slice would describe a device that is not there; and the e2e contract
(the sibling disappears while the pod runs) is NVIDIA's. :meth:`Passthrough.check_sibling`
refuses a claim whose device's twin is prepared for another claim, for the window before the
republished slice reaches the scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from dra_api_types import VfioDeviceConfig
from dra_kubelet_core.cdi import ContainerEdits
from dra_kubelet_core.errors import (
    ClaimError,
    ClaimRef,
    DeviceConfigError,
    DeviceInUseError,
    DeviceNodeMissingError,
    PluginError,
)
from dra_kubelet_core.host_devices import HostDevices
from dra_nvlib import (
    VFIO_DRIVER,
    DeviceError,
    DeviceLib,
    GpuInfo,
    PassthroughTarget,
    PciBus,
    PciFacts,
    bind_nvidia,
    bind_vfio,
    repair_unbound,
)

from dra_kubelet_plugin.inventory import DeviceType, NodeDevice, build_vfio_devices
from dra_kubelet_plugin.vfio_edits import (
    VfioNodes,
    iommu_settings,
    vfio_container_edits,
    vfio_nodes,
)

__all__ = ["BoundDevice", "Passthrough", "PassthroughFailedError"]

log = logging.getLogger(__name__)

#: Keys of a device's checkpointed ``driver_state``: the PCI address handed to ``vfio-pci``,
#: the GPU's UUID and its persistence mode before (restored when it is back on ``nvidia``).
STATE_PCI_BUS_ID = "vfioPciBusID"
STATE_GPU_UUID = "gpuUUID"
STATE_PERSISTENCE = "persistenceMode"


class PassthroughFailedError(ClaimError):
    """A GPU could not be handed to ``vfio-pci`` (in use, no IOMMU, a shared IOMMU group, a
    bind that did not take); the message names the device, its PCI address and the reason."""


@dataclass(frozen=True)
class BoundDevice:
    """A GPU now held by ``vfio-pci``: its facts after the bind, nodes and CDI edits."""

    device: NodeDevice
    facts: PciFacts
    nodes: VfioNodes
    edits: ContainerEdits

    def metadata_attributes(self, published: Mapping[str, object]) -> dict[str, object]:
        """The device's published attributes plus what a VM launcher needs to open it."""
        attrs = dict(published)
        if self.facts.iommu_group is not None:
            attrs["iommuGroup"] = {"int": self.facts.iommu_group}
        attrs["iommuBackend"] = {"string": self.nodes.backend}
        attrs["vfioDeviceNode"] = {"string": self.nodes.device}
        if self.nodes.api is not None:
            attrs["vfioAPIDeviceNode"] = {"string": self.nodes.api}
        attrs["kernelDriver"] = {"string": self.facts.driver or ""}
        return attrs


class Passthrough:
    """The node's PCI bus seen through this driver's passthrough devices."""

    def __init__(
        self,
        bus: PciBus,
        *,
        host: HostDevices,
        lib: DeviceLib | None = None,
        wait_timeout_s: float = 30.0,
    ) -> None:
        """``host`` backs the container's VFIO nodes (the host's own, which must exist, or
        the fake backend's stand-ins). ``lib`` reads and restores the GPU's persistence mode
        around passthrough."""
        self.bus = bus
        self._lib = lib
        self._host = host
        self._wait_timeout_s = wait_timeout_s
        self._known: dict[str, GpuInfo] = {}

    def devices(self, gpus: Iterable[GpuInfo]) -> list[NodeDevice]:
        """The ``gpu-vfio-M`` devices to publish next to ``gpus``' own.

        NVML stops listing a GPU once ``vfio-pci`` holds it; its facts from the last
        enumeration that had it keep its ``gpu-vfio-M`` published meanwhile.
        """
        self._known.update((g.pci_bus_id, g) for g in gpus)
        pci = [self.bus.facts(b) for b in self.bus.gpu_bus_ids()]
        return build_vfio_devices(self._known.values(), pci, iommufd=self.bus.iommufd_available())

    @staticmethod
    def check_sibling(
        ref: ClaimRef,
        device: NodeDevice,
        held: Mapping[str, Collection[str]],
        devices: Iterable[NodeDevice],
    ) -> None:
        """Refuse ``device`` when its twin is prepared for another claim (``held``: device
        name -> UIDs of the claims it is prepared for).

        Raises:
            DeviceInUseError: naming both devices and the other claim.
        """
        if device.type not in (DeviceType.GPU, DeviceType.VFIO):
            return
        for other in devices:
            if other.name == device.name or other.type not in (DeviceType.GPU, DeviceType.VFIO):
                continue
            if other.gpu.pci_bus_id != device.gpu.pci_bus_id:
                continue
            owners = sorted(set(held.get(other.name, ())) - {ref.uid})
            if owners:
                owner = ", ".join(owners)
                raise DeviceInUseError(
                    ref,
                    f"device {device.name} is the same GPU ({device.gpu.pci_bus_id}) as "
                    f"{other.name}, prepared for claim {owner}",
                    field="status.allocation.devices.results",
                )

    def device_state(self, device: NodeDevice) -> dict[str, object]:
        """What to checkpoint before the switch, so a crash in it can be undone and the
        GPU's persistence mode restored after it (blocking: NVML)."""
        state: dict[str, object] = {
            STATE_PCI_BUS_ID: device.gpu.pci_bus_id,
            STATE_GPU_UUID: device.gpu.uuid,
        }
        if self._lib is not None:
            try:
                state[STATE_PERSISTENCE] = self._lib.persistence_mode(device.gpu.uuid)
            except DeviceError as exc:
                log.info(
                    "persistence mode unknown; not restored after passthrough",
                    extra={"event": "persistence_mode_unknown", "error": str(exc)},
                )
        return state

    def bind(
        self,
        ref: ClaimRef,
        device: NodeDevice,
        config: VfioDeviceConfig | None,
        *,
        config_field: str | None,
    ) -> BoundDevice:
        """Hand the device's GPU to ``vfio-pci`` and return its CDI edits (blocking: run it
        in a thread). The config is checked before anything changes.

        Raises:
            DeviceConfigError: the config names an unknown ``iommu.backendPolicy``.
            PassthroughFailedError: the switch was refused or failed; the GPU is on ``nvidia``.
            DeviceNodeMissingError: the VFIO node the container needs is missing on the host.
        """
        bus_id = device.gpu.pci_bus_id
        try:
            iommu_settings(config)
        except ValueError as exc:
            raise DeviceConfigError(
                ref, f"{exc} (for device {device.name})", field=config_field
            ) from exc
        try:
            facts = bind_vfio(
                self.bus,
                PassthroughTarget(bus_id=bus_id, minor=device.gpu.minor),
                ours=self.bus.gpu_bus_ids(),
                wait_timeout_s=self._wait_timeout_s,
            )
        except DeviceError as exc:
            raise PassthroughFailedError(
                ref, f"GPU {device.name} ({bus_id}) cannot be passed through: {exc.detail}"
            ) from exc
        nodes = vfio_nodes(facts, config, iommufd_available=self.bus.iommufd_available())
        for path in (nodes.device, nodes.api):
            if path is not None and not self._host.exists(path):
                self.release(bus_id)
                raise DeviceNodeMissingError(
                    ref, f"VFIO node {path} for {device.name} ({bus_id}) is missing on the host"
                )
        edits = vfio_container_edits(nodes, self._host)
        return BoundDevice(device=device, facts=facts, nodes=nodes, edits=edits)

    def release(self, bus_id: str) -> None:
        """Give the GPU back to ``nvidia`` (idempotent; blocking).

        Raises:
            PluginError: the kernel did not bind ``nvidia`` (the kubelet retries unprepare).
        """
        try:
            bind_nvidia(self.bus, bus_id)
        except DeviceError as exc:
            raise PluginError(f"GPU {bus_id}: giving it back to nvidia failed: {exc}") from exc

    def restore(self, state: Mapping[str, object]) -> None:
        """Undo a checkpointed switch: the GPU back on ``nvidia``, then its persistence mode
        as it was (a failure there is logged: the GPU works without it).

        Raises:
            PluginError: the kernel did not bind ``nvidia``.
        """
        bus_id = self.bus_id_of(state)
        if bus_id is None:
            return
        self.release(bus_id)
        uuid = state.get(STATE_GPU_UUID)
        if (
            self._lib is None
            or state.get(STATE_PERSISTENCE) is not True
            or not isinstance(uuid, str)
        ):
            return
        try:
            self._lib.set_persistence_mode(uuid, enabled=True)
        except DeviceError as exc:
            log.warning(
                "persistence mode not restored after passthrough",
                extra={"event": "persistence_mode_not_restored", "gpu": uuid, "error": str(exc)},
            )

    @staticmethod
    def bus_id_of(state: Mapping[str, object]) -> str | None:
        """The PCI address a device's checkpointed state says was handed to ``vfio-pci``."""
        value = state.get(STATE_PCI_BUS_ID)
        return value if isinstance(value, str) else None

    def recover(self, held: Collection[str], *, keep_bound: bool = False) -> list[str]:
        """Every GPU with no driver, and every GPU on ``vfio-pci`` whose address is not in
        ``held`` (the addresses of checkpointed passthrough devices), goes back to ``nvidia``;
        returns the addresses given back. ``keep_bound``: GPUs on ``vfio-pci`` all stay
        (claims whose state was lost may hold them). Each GPU is tried.

        Raises:
            PluginError: GPUs ``nvidia`` did not take back (each named).
        """
        given: list[str] = []
        failed: list[str] = []
        for bus_id in sorted(self.bus.gpu_bus_ids()):
            try:
                if repair_unbound(self.bus, [bus_id]):
                    given.append(bus_id)
                    continue
                if bus_id in held or keep_bound:
                    continue
                if self.bus.facts(bus_id).driver != VFIO_DRIVER:
                    continue
                self.release(bus_id)
            except (DeviceError, PluginError) as exc:
                log.error(str(exc), extra={"event": "vfio_recovery_failed", "pci_bus_id": bus_id})
                failed.append(f"GPU {bus_id}: {exc}")
                continue
            log.warning(
                "GPU on vfio-pci held by no claim; given back to nvidia",
                extra={"event": "vfio_leftover_released", "pci_bus_id": bus_id},
            )
            given.append(bus_id)
        if failed:
            raise PluginError("; ".join(failed))
        return given
