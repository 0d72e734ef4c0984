"""The informer caches as the allocator's input, re-reading only objects that changed.

Each object is read once per resourceVersion (slices also once per set of
DeviceTaintRules), so a change to one claim costs one parse, not ten thousand. The caches
replace objects rather than change them, so an object that is still the one read last time
is known unchanged without looking into it. Parsed slices keep their devices, and with them
the devices' cached selector results.

A parsed slice holds reference cycles (each device refers to its slice), so one that is
replaced or deleted is freed only by the cyclic collector; ``slices_dropped`` counts them
for the loop's heap policy.

Parsed claims share the parts they have in common (equal specs, allocation configs and node
selectors: :mod:`dra_allocator.claim_interning`).

The controller watches only pods not bound to a node (``caches.PENDING_PODS``): it reads
pods only to diagnose unschedulable ones, and a bound pod never is again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from dra_allocator.claim_interning import ClaimInterner
from dra_allocator.snapshot import Snapshot, add_to_snapshot, read_object
from dra_kube_client.informers.store import Store

KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "Node", "Pod")


def resource_version(obj: Mapping[str, object]) -> str:
    """``metadata.resourceVersion`` ('' when missing)."""
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


class Read(NamedTuple):
    """One cached object as the view last read it."""

    #: The cache's object itself (caches replace objects, so identity means unchanged).
    raw: object
    resource_version: str
    #: What it was read as; None when left out (unreadable).
    item: object


@dataclass(slots=True)
class ClusterView:
    """Parsed objects of the caches, kept between snapshots.

    An object the allocator cannot read is left out of every snapshot, and ``on_error`` is
    told once per resourceVersion (not on every reconcile).
    """

    stores: Mapping[str, Store]
    on_error: Callable[[str, str, Exception], None] = lambda *_: None
    # kind -> key -> how it was read
    _parsed: dict[str, dict[str, Read]] = field(default_factory=dict)
    _rules_version: int = -1
    #: Claims made from one template share their spec's parsed objects (and more).
    _interner: ClaimInterner = field(default_factory=ClaimInterner)
    #: Parsed slices replaced or deleted since the view was made (a running count).
    slices_dropped: int = 0

    @property
    def slices_parsed(self) -> int:
        """Parsed slices held now."""
        return sum(r.item is not None for r in self._parsed.get("ResourceSlice", {}).values())

    def snapshot(self) -> Snapshot:
        """Classes, slices, claims, nodes and pods as they are cached now.

        The parsed objects are shared between snapshots (that is what makes them cheap): a
        caller must not commit allocations to the claims (diagnosis never does).
        """
        rules_store = self.stores.get("DeviceTaintRule")
        rules = list(rules_store.items().values()) if rules_store is not None else []
        rules_version = rules_store.version if rules_store is not None else 0
        if rules_version != self._rules_version:
            dropped = self._parsed.pop("ResourceSlice", {})
            self.slices_dropped += sum(r.item is not None for r in dropped.values())
            self._rules_version = rules_version
        snap = Snapshot()
        for kind in KINDS:
            store = self.stores.get(kind)
            if store is None:
                continue
            old = self._parsed.get(kind, {})
            fresh: dict[str, Read] = {}
            for key, obj in store.items().items():
                cached = old.get(key)
                if cached is not None and cached.raw is obj:
                    fresh[key] = cached
                    item = cached.item
                    if item is not None:
                        add_to_snapshot(snap, item)
                    continue
                version = resource_version(obj)
                if cached is not None and cached.resource_version == version and version:
                    item = cached.item
                else:
                    try:
                        item = read_object(
                            obj, where=f"{kind} {key}", taint_rules=rules, interner=self._interner
                        )
                    except Exception as exc:  # skipped, reported once per resourceVersion
                        self.on_error(kind, key, exc)
                        item = None
                fresh[key] = Read(obj, version, item)
                if item is None:
                    continue
                add_to_snapshot(snap, item)
            if kind == "ResourceSlice":
                self.slices_dropped += _dropped(old, fresh)
            self._parsed[kind] = fresh
        return snap


def _dropped(old: Mapping[str, Read], fresh: Mapping[str, Read]) -> int:
    """Parsed objects of ``old`` that ``fresh`` no longer holds (replaced or deleted)."""
    return sum(
        1
        for key, read in old.items()
        if read.item is not None and (key not in fresh or fresh[key].item is not read.item)
    )
