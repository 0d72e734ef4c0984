"""The passthrough part of preparing a claim (gate ``PassthroughSupport``), called by the GPU
driver for the claim's ``vfio`` devices.

Before a GPU changes driver its PCI address is checkpointed in the device's ``driver_state``
(:meth:`PrepareContext.record`), so an unprepare, or the core's undo of a failed prepare, or
:meth:`PassthroughClaims.recover` after a crash, knows what to give back to ``nvidia``. A
reboot discards the checkpoint (new boot ID) and the kubelet prepares the claims again, which
binds again. With ``DeviceMetadata`` the KEP-5304 file of each request naming the GPU's PCI
address and IOMMU facts is written and mounted (:mod:`dra_kubelet_plugin.device_metadata`).

Which devices are prepared (device name -> claim UIDs), and which claims hold a GPU on
``vfio-pci`` (its reference count: VMs sharing one ``gpu-vfio-M`` by admin access), are taken
from the checkpoint the engine read under the node lock for each call, never from memory, so a
second plugin instance's claims count too (a surge rollout): a GPU already on ``vfio-pci`` for
another claim is not bound again and the new claim records the state the first one recorded
before the switch (the persistence mode to restore), and an unprepare gives the GPU back to
``nvidia`` only when no other claim holds it. The last set seen drives the slice: the twin
of a prepared device is left out (:func:`~dra_kubelet_plugin.inventory.hidden_siblings`), and
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
        # Device name -> UIDs of the claims it is prepared for (shared devices: several), as
        # of the last checkpoint seen.
        self._held: dict[str, set[str]] = {}

    # ------------------------------------------------------------------ slice
    def held(self) -> dict[str, set[str]]:
        """Prepared device name -> UIDs of the claims holding it (last checkpoint seen)."""
        return {name: set(uids) for name, uids in self._held.items()}

    def _observe(
        self, claims: Mapping[str, PreparedClaim], *, without: str = "", always: bool = False
    ) -> None:
        """Take the held set from the checkpoint's ``claims`` (``without``: a claim being
        dropped) and republish when it changed (``always``: in any case)."""
        held: dict[str, set[str]] = {}
        for uid, entry in claims.items():
            if uid == without:
                continue
            for d in entry.devices:
                held.setdefault(d.device_name, set()).add(uid)
        if always or held != self._held:
            self._held = held
            self._changed()

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
        # The claim's own entry is in the checkpoint already (started): its devices are held
        # from now, and a twin held by another claim, of either instance, is refused.
        self._observe(ctx.claims)
        for p in unique.values():
            Passthrough.check_sibling(ref, p.device, self._held, published)
        vfio = [p for p in unique.values() if p.device.type is DeviceType.VFIO]
        if not vfio:
            return {}
        states: dict[str, dict[str, object]] = {}
        for p in vfio:
            # A GPU another claim holds on vfio-pci keeps the state recorded before its switch
            # (read now, it would say what vfio-pci left, not what to restore).
            held = _holder_state(ctx.claims, p.device.gpu.pci_bus_id, besides=ref.uid)
            if held is None:
                held = await asyncio.to_thread(self.passthrough.device_state, p.device)
            states[p.device.name] = {**_state_of(ctx.entry, p.device.name), **held}
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
                claim_uid=ref.uid, claim_name=ref.name, request=request, doc=doc
            )
            for p, _ in members:
                current = out[p.device.name]
                out[p.device.name] = replace(current, mounts=(*current.mounts, mount))
        return out

    # ------------------------------------------------------------------ unprepare
    async def unprepare(self, entry: PreparedClaim, *, claims: Mapping[str, PreparedClaim]) -> None:
        """Give the entry's switched GPUs back to ``nvidia``, each unless another claim of
        ``claims`` (the checkpoint's, read under the node lock: either instance's) still
        holds it on ``vfio-pci``, and remove its metadata files (idempotent).

        Raises:
            PluginError: a GPU could not be given back (the kubelet retries).
        """
        for device in entry.devices:
            bus_id = Passthrough.bus_id_of(device.driver_state)
            if bus_id is None:
                continue
            others = _holders(claims, bus_id, besides=entry.uid)
            if others:
                log.info(
                    "GPU kept on vfio-pci: other claims hold it",
                    extra={
                        "event": "vfio_release_deferred",
                        "claim_uid": entry.uid,
                        "pci_bus_id": bus_id,
                        "holders": others,
                    },
                )
                continue
            await asyncio.to_thread(self.passthrough.restore, device.driver_state)
        if self._metadata is not None:
            self._metadata.release(entry.uid)
            legacy = MetadataFiles.legacy_key(entry.namespace, entry.name)
            if entry.name and not any(
                MetadataFiles.legacy_key(e.namespace, e.name) == legacy
                for uid, e in claims.items()
                if uid != entry.uid
            ):
                self._metadata.remove(legacy)
        self._observe(claims, without=entry.uid)

    # ------------------------------------------------------------------ recover
    async def recover(self, entries: Mapping[str, PreparedClaim]) -> None:
        """GPUs no entry holds go back to ``nvidia`` (a crash between unbind and bind
        included), unless an entry was rebuilt from its spec (its GPUs are unknown: every GPU
        on ``vfio-pci`` stays); metadata files of unknown claims go; the held set is rebuilt.

        Raises:
            PluginError: GPUs ``nvidia`` did not take back (named; the rest was done).
        """
        # Started entries too: the kubelet's retry completes them on the same devices.
        self._observe(entries, always=True)
        if self._metadata is not None:
            keep = set(entries) | {
                MetadataFiles.legacy_key(e.namespace, e.name) for e in entries.values() if e.name
            }
            for key in self._metadata.known_claims() - keep:
                self._metadata.remove(key)
        held_buses = {
            bus
            for entry in entries.values()
            for d in entry.devices
            if (bus := Passthrough.bus_id_of(d.driver_state)) is not None
        }
        unknown = any(e.rebuilt for e in entries.values())
        given = await asyncio.to_thread(self.passthrough.recover, held_buses, keep_bound=unknown)
        if given:
            log.warning(
                "GPUs given back to nvidia at recovery",
                extra={"event": "vfio_recovered", "pci_bus_ids": given},
            )


def _holders(claims: Mapping[str, PreparedClaim], bus_id: str, *, besides: str) -> list[str]:
    """UIDs of the claims but ``besides`` whose devices recorded handing ``bus_id`` to
    ``vfio-pci`` (pure)."""
    return sorted(
        uid
        for uid, entry in claims.items()
        if uid != besides
        and any(Passthrough.bus_id_of(d.driver_state) == bus_id for d in entry.devices)
    )


def _holder_state(
    claims: Mapping[str, PreparedClaim], bus_id: str, *, besides: str
) -> dict[str, object] | None:
    """The state another claim than ``besides`` recorded for ``bus_id`` before its switch
    (``None``: no other claim holds it; pure)."""
    for uid in _holders(claims, bus_id, besides=besides):
        for device in claims[uid].devices:
            if Passthrough.bus_id_of(device.driver_state) == bus_id:
                return dict(device.driver_state)
    return None


def _state_of(entry: PreparedClaim, device_name: str) -> dict[str, object]:
    for device in entry.devices:
        if device.device_name == device_name:
            return dict(device.driver_state)
    return {}


def _attributes(device: NodeDevice) -> dict[str, object]:
    attrs = device_json(device).get("attributes")
    return dict(attrs) if isinstance(attrs, dict) else {}
