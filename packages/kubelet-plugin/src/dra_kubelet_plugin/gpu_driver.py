"""The ``gpu.nvidia.com`` driver on top of the core: implements
:class:`~dra_kubelet_plugin.core.driver.Driver` for full GPUs and MIG devices.

Planning resolves each result to a published :class:`NodeDevice` and decodes its
``resource.nvidia.com/v1beta1`` config; preparing renders the backend's CDI edits (and, for
the fake backend, the per-claim host files that :meth:`GpuDriver.unprepare` removes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from dra_api_types import ResourceClaim

from dra_kubelet_plugin.allocation import PlannedDevice, plan_claim
from dra_kubelet_plugin.cdi import GPU_CDI, cdi_device_id
from dra_kubelet_plugin.container_edits import EditsProvider
from dra_kubelet_plugin.core.allocated import AllocatedDevice
from dra_kubelet_plugin.core.cdi_store import CDIStore
from dra_kubelet_plugin.core.checkpoint import (
    Checkpoint,
    CheckpointStore,
    PreparedClaim,
    PreparedDevice,
)
from dra_kubelet_plugin.core.claim_source import ClaimSource
from dra_kubelet_plugin.core.driver import ClaimEdits, ClaimPlan, DriverIdentity, PrepareContext
from dra_kubelet_plugin.core.errors import ClaimRef, UnsupportedConfigError
from dra_kubelet_plugin.core.events import EventRecorder
from dra_kubelet_plugin.core.metrics import PluginMetrics
from dra_kubelet_plugin.core.node_lock import NodeLock
from dra_kubelet_plugin.core.state import ClaimEngine, count_prepared_devices
from dra_kubelet_plugin.device_config import decode_device_config, sharing_of
from dra_kubelet_plugin.inventory import NodeDevice

__all__ = ["DeviceState", "GpuDriver", "gpu_identity", "prepared_device_types"]


def gpu_identity(driver_name: str) -> DriverIdentity:
    """The GPU plugin's identity: CDI ``k8s.gpu.nvidia.com/claim``, events from
    ``gpu.nvidia.com-kubelet-plugin``."""
    return DriverIdentity(name=driver_name, cdi=GPU_CDI)


class GpuDriver:
    """Plans and prepares claims on the node's GPUs and MIG devices."""

    def __init__(
        self, *, driver_name: str, devices: Sequence[NodeDevice], edits: EditsProvider
    ) -> None:
        """Serve ``devices`` (replaced by :meth:`set_devices`) with the backend's ``edits``."""
        self._identity = gpu_identity(driver_name)
        self._devices = {d.name: d for d in devices}
        self._edits = edits

    @property
    def identity(self) -> DriverIdentity:
        """See :meth:`Driver.identity`."""
        return self._identity

    @property
    def devices(self) -> dict[str, NodeDevice]:
        """Published devices by name."""
        return dict(self._devices)

    def set_devices(self, devices: Sequence[NodeDevice]) -> None:
        """Replace the published devices (the hardware changed); prepared claims keep theirs."""
        self._devices = {d.name: d for d in devices}

    def plan(
        self, ref: ClaimRef, claim: ResourceClaim, allocated: Sequence[AllocatedDevice]
    ) -> ClaimPlan:
        """See :meth:`Driver.plan`; sharing strategies are refused until sharing lands."""
        del claim  # everything the GPU plan needs is in the results and their configs
        planned = plan_claim(allocated, ref, devices=self._devices, decode=decode_device_config)
        for p in planned:
            strategy = sharing_of(p.config)
            if strategy is not None:
                raise UnsupportedConfigError(
                    ref,
                    f"sharing strategy {strategy} for device {p.device.name} is not supported by "
                    "this plugin version yet (GPU sharing comes with the sharing component)",
                    field=p.config_field,
                )
        prepared = tuple(
            PreparedDevice(
                request_names=(p.request,),
                pool_name=p.pool_name,
                device_name=p.device.name,
                cdi_device_ids=(cdi_device_id(ref.uid, p.device.name),),
                admin_access=p.admin_access,
                share_id=p.share_id,
            )
            for p in planned
        )
        return ClaimPlan(devices=prepared, context=planned)

    async def prepare(self, ref: ClaimRef, plan: ClaimPlan, ctx: PrepareContext) -> ClaimEdits:
        """See :meth:`Driver.prepare`: the backend's edits (fake: writes host files)."""
        del ctx  # nothing to undo after a crash but host files, which recover() finds
        planned = cast("list[PlannedDevice]", plan.context)
        # Several results may name one device (admin access, shares): one CDI device each.
        unique: dict[str, NodeDevice] = {p.device.name: p.device for p in planned}
        devices = tuple((name, self._edits.device_edits(ref, d)) for name, d in unique.items())
        common = self._edits.claim_edits(ref, list(unique.values()))
        return ClaimEdits(devices=devices, common=(common,))

    async def unprepare(self, entry: PreparedClaim) -> None:
        """See :meth:`Driver.unprepare`: removes the claim's host files."""
        self._edits.release(entry.uid)

    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        """See :meth:`Driver.recover`: host files of claims not checkpointed are removed."""
        for uid in self._edits.known_claims() - set(entries):
            self._edits.release(uid)

    def device_type(self, device: PreparedDevice) -> str:
        """``gpu`` or ``mig``; ``unknown`` for a device this node no longer publishes."""
        published = self._devices.get(device.device_name)
        return str(published.type) if published is not None else "unknown"


class DeviceState(ClaimEngine):
    """The core's claim engine with a :class:`GpuDriver`: the GPU plugin's prepared claims."""

    def __init__(
        self,
        *,
        driver_name: str,
        pool_name: str,
        devices: Sequence[NodeDevice],
        claims: ClaimSource,
        checkpoints: CheckpointStore,
        cdi: CDIStore,
        edits: EditsProvider,
        lock: NodeLock,
        boot_id: str,
        events: EventRecorder,
        metrics: PluginMetrics,
    ) -> None:
        """Wire the engine; call :meth:`start` before serving."""
        self.gpus = GpuDriver(driver_name=driver_name, devices=devices, edits=edits)
        super().__init__(
            driver=self.gpus,
            pool_name=pool_name,
            claims=claims,
            checkpoints=checkpoints,
            cdi=cdi,
            lock=lock,
            boot_id=boot_id,
            events=events,
            metrics=metrics,
        )

    @property
    def devices(self) -> dict[str, NodeDevice]:
        """Published devices by name."""
        return self.gpus.devices

    def set_devices(self, devices: Sequence[NodeDevice]) -> None:
        """Replace the published devices (the hardware changed); prepared claims keep theirs."""
        self.gpus.set_devices(devices)


def prepared_device_types(
    checkpoint: Checkpoint, devices: Mapping[str, NodeDevice]
) -> dict[str, int]:
    """Device type -> how many devices of completely prepared claims have it (NVIDIA's
    ``nvidia_dra_prepared_devices``); a device this node no longer publishes is ``unknown``."""

    def kind(prepared: PreparedDevice) -> str:
        device = devices.get(prepared.device_name)
        return str(device.type) if device is not None else "unknown"

    return count_prepared_devices(checkpoint, kind)
