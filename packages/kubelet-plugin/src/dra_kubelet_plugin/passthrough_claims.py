"""The passthrough part of preparing a claim (gate ``PassthroughSupport``), called by the GPU
driver for the claim's ``vfio`` devices.

Before a GPU changes driver its PCI address is checkpointed in the device's ``driver_state``
(:meth:`PrepareContext.record`), so an unprepare, or the core's undo of a failed prepare, or
:meth:`PassthroughClaims.recover` after a crash, knows what to give back to ``nvidia``. A
reboot discards the checkpoint (new boot ID) and the kubelet prepares the claims again, which
binds again. With ``DeviceMetadata`` the KEP-5304 file of each request naming the GPU's PCI
address and IOMMU facts is written and mounted (:mod:`dra_kubelet_plugin.device_metadata`).

The set of prepared devices kept here (device name -> claim UIDs) drives the slice: the twin of
a prepared device is left out (:func:`~dra_kubelet_plugin.inventory.hidden_siblings`), and
``on_change`` republishes when it changes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

from dra_api_types import VfioDeviceConfig
from dra_kubelet_core.cdi import ContainerEdits
from dra_kubelet_core.checkpoint import PreparedClaim
from dra_kubelet_core.driver import PrepareContext
from dra_kubelet_core.errors import ClaimRef

from dra_kubelet_plugin.allocation import PlannedDevice
from dra_kubelet_plugin.device_metadata import MetadataDevice, MetadataFiles, render_metadata
from dra_kubelet_plugin.inventory import DeviceType, NodeDevice, hidden_siblings
from dra_kubelet_plugin.passthrough_devices import BoundDevice, Passthrough
from dra_kubelet_plugin.slices import device_json

__all__ = ["PassthroughClaims"]

log = logging.getLogger(__name__)


class PassthroughClaims:
    """Prepares, unprepares and recovers the ``vfio`` devices of claims."""

    def __init__(
        self,
        passthrough: Passthrough,
        *,
        driver_name: str,
        metadata: MetadataFiles | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        """``metadata``: write KEP-5304 files (gate ``DeviceMetadata``); ``on_change`` is
        called when the set of prepared devices changes (republish the slice)."""
        self.passthrough = passthrough
        self._driver = driver_name
        self._metadata = metadata
        self.on_change = on_change
        # Device name -> UIDs of the claims it is prepared for (shared devices: several).
        self._held: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ slice
    def held(self) -> dict[str, set[str]]:
        """Prepared device name -> UIDs of the claims holding it."""
        return {name: set(uids) for name, uids in self._held.items()}

    def visible(self, devices: Sequence[NodeDevice]) -> list[NodeDevice]:
        """``devices`` without the twins of prepared ones."""
        hidden = hidden_siblings(devices, self._held)
        return [d for d in devices if d.name not in hidden]

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    # ------------------------------------------------------------------ prepare
    async def prepare(
        self,
        ref: ClaimRef,
        planned: Sequence[PlannedDevice],
        devices: Iterable[NodeDevice],
        ctx: PrepareContext,
    ) -> dict[str, ContainerEdits]:
        """Check the twins, switch the claim's ``vfio`` GPUs to ``vfio-pci``, and return their
        CDI edits by device name (empty when the claim has none).

        Raises:
            ClaimError: a twin is held by another claim, a bad config, or a refused switch
                (the core then calls :meth:`unprepare`, which gives back what was switched).
        """
        unique = {p.device.name: p for p in planned}
        published = list(devices)
        for p in unique.values():
            Passthrough.check_sibling(ref, p.device, self._held, published)
        vfio = [p for p in unique.values() if p.device.type is DeviceType.VFIO]
        # Held before anything changes: a concurrent claim of the twin is refused from now.
        for name in unique:
            self._held.setdefault(name, set()).add(ref.uid)
        self._changed()
        if not vfio:
            return {}
        states = {
            p.device.name: {
                **_state_of(ctx.entry, p.device.name),
                **await asyncio.to_thread(self.passthrough.device_state, p.device),
            }
            for p in vfio
        }
        await ctx.record(device_states=states)
        bound: list[tuple[PlannedDevice, BoundDevice]] = []
        for p in vfio:
            config = p.config if isinstance(p.config, VfioDeviceConfig) else None
            result = await asyncio.to_thread(
                self.passthrough.bind, ref, p.device, config, config_field=p.config_field
            )
            bound.append((p, result))
        edits = {p.device.name: b.edits for p, b in bound}
        if self._metadata is not None:
            edits = self._with_metadata(ref, bound, edits)
        return edits

    def _with_metadata(
        self,
        ref: ClaimRef,
        bound: Sequence[tuple[PlannedDevice, BoundDevice]],
        edits: Mapping[str, ContainerEdits],
    ) -> dict[str, ContainerEdits]:
        assert self._metadata is not None
        out = dict(edits)
        by_request: dict[str, list[tuple[PlannedDevice, BoundDevice]]] = {}
        for p, b in bound:
            by_request.setdefault(p.request, []).append((p, b))
        for request, members in sorted(by_request.items()):
            doc = render_metadata(
                driver=self._driver,
                claim_namespace=ref.namespace,
                claim_name=ref.name,
                claim_uid=ref.uid,
                request=request,
                devices=[
                    MetadataDevice(
                        name=p.device.name,
                        pool=p.pool_name,
                        attributes=b.metadata_attributes(_attributes(p.device)),
                    )
                    for p, b in members
                ],
            )
            mount = self._metadata.write(
                claim_namespace=ref.namespace, claim_name=ref.name, request=request, doc=doc
            )
            for p, _ in members:
                current = out[p.device.name]
                out[p.device.name] = replace(current, mounts=(*current.mounts, mount))
        return out

    # ------------------------------------------------------------------ unprepare
    async def unprepare(self, entry: PreparedClaim) -> None:
        """Give the entry's switched GPUs back to ``nvidia`` and remove its metadata files
        (idempotent).

        Raises:
            PluginError: a GPU could not be given back (the kubelet retries).
        """
        for device in entry.devices:
            if Passthrough.bus_id_of(device.driver_state) is not None:
                await asyncio.to_thread(self.passthrough.restore, device.driver_state)
        if self._metadata is not None and entry.name:
            self._metadata.release(entry.namespace, entry.name)
        before = set(self._held)
        for uids in self._held.values():
            uids.discard(entry.uid)
        self._held = {name: uids for name, uids in self._held.items() if uids}
        if set(self._held) != before:
            self._changed()

    # ------------------------------------------------------------------ recover
    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        """At start: GPUs no entry holds go back to ``nvidia`` (a crash between unbind and
        bind included); metadata files of unknown claims go; the held set is rebuilt."""
        held_buses = {
            bus
            for entry in entries.values()
            for d in entry.devices
            if (bus := Passthrough.bus_id_of(d.driver_state)) is not None
        }
        given = await asyncio.to_thread(self.passthrough.recover, held_buses)
        if given:
            log.warning(
                "GPUs given back to nvidia at start",
                extra={"event": "vfio_recovered", "pci_bus_ids": given},
            )
        if self._metadata is not None:
            keep = {MetadataFiles.claim_key(e.namespace, e.name) for e in entries.values()}
            for key in self._metadata.known_claims() - keep:
                self._metadata.remove(key)
        # Started entries too: the kubelet's retry completes them on the same devices.
        self._held = {}
        for uid, entry in entries.items():
            for d in entry.devices:
                self._held.setdefault(d.device_name, set()).add(uid)
        self._changed()


def _state_of(entry: PreparedClaim, device_name: str) -> dict[str, object]:
    for device in entry.devices:
        if device.device_name == device_name:
            return dict(device.driver_state)
    return {}


def _attributes(device: NodeDevice) -> dict[str, object]:
    attrs = device_json(device).get("attributes")
    return dict(attrs) if isinstance(attrs, dict) else {}
