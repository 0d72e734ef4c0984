"""The informer caches as the allocator's input, re-reading only objects that changed.

Each object is read once per resourceVersion (slices also once per set of
DeviceTaintRules), so a change to one claim costs one parse, not ten thousand. The caches
tell the view which keys changed, so a snapshot looks only at those (a relist, or new
DeviceTaintRules for the slices, has it look at every object of the kind); and the caches
replace objects rather than change them, so an object that is still the one read last time
is known unchanged without looking into it. Parsed slices keep their devices, and with them
the devices' cached selector results.

Each snapshot says which claims differ from the view's snapshot before
(:class:`~dra_allocator.claim_changes.ClaimChanges`), for what is derived from every claim
to be updated by those alone.

A parsed slice holds reference cycles (each device refers to its slice), so one that is
replaced or deleted is freed only by the cyclic collector; ``slices_dropped`` counts them
for the loop's heap policy.

Parsed claims share the parts they have in common (equal specs, allocation configs and node
selectors: :mod:`dra_allocator.claim_interning`).

The controller watches only pods not bound to a node (``caches.PENDING_PODS``): it reads
pods only to diagnose unschedulable ones, and a bound pod never is again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dra_allocator.claim_changes import ClaimChanges, next_serial
from dra_allocator.claim_interning import ClaimInterner
from dra_allocator.model import ClaimInfo
from dra_allocator.snapshot import Snapshot, read_object
from dra_kube_client.informers.store import Store

KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaim", "Node", "Pod")

ClaimPair = tuple[ClaimInfo | None, ClaimInfo | None]
#: An object as read before and after a change (None: absent, or unreadable).
ItemPair = tuple[object | None, object | None]
#: The DeviceTaintRules a slice is read with.
Rules = Sequence[Mapping[str, Any]]


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
    told once per resourceVersion (not on every reconcile). The view subscribes to the
    stores when made; objects of a kind appear in a snapshot in the order the view first
    read them.
    """

    stores: Mapping[str, Store]
    on_error: Callable[[str, str, Exception], None] = lambda *_: None
    # kind -> key -> how it was read
    _parsed: dict[str, dict[str, Read]] = field(default_factory=dict)
    # kind -> key -> what it was read as, for the readable objects
    _items: dict[str, dict[str, object]] = field(default_factory=dict)
    # kind -> the keys the store changed since the last snapshot (a dict as an ordered
    # set); absent or None: look at every object (never read yet, or relisted)
    _dirty: dict[str, dict[str, None] | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _rules_version: int = -1
    #: Claims made from one template share their spec's parsed objects (and more).
    _interner: ClaimInterner = field(default_factory=ClaimInterner)
    # The last snapshot's ClaimChanges.serial.
    _serial: int | None = None
    #: Parsed slices replaced or deleted since the view was made (a running count).
    slices_dropped: int = 0

    def __post_init__(self) -> None:
        for store in self.stores.values():
            store.subscribe(self._changed)

    def _changed(self, kind: str, key: str) -> None:
        # Called by the store after each change, from the informer's thread.
        with self._lock:
            keys = self._dirty.get(kind)
            if key == "*":
                self._dirty[kind] = None
            elif keys is not None:
                keys[key] = None

    @property
    def slices_parsed(self) -> int:
        """Parsed slices held now."""
        return len(self._items.get("ResourceSlice", {}))

    def snapshot(self) -> Snapshot:
        """Classes, slices, claims, nodes and pods as they are cached now, and which claims
        changed since the last snapshot.

        The parsed objects are shared between snapshots (that is what makes them cheap): a
        caller must not commit allocations to the claims (diagnosis never does).
        """
        rules_store = self.stores.get("DeviceTaintRule")
        rules = list(rules_store.items().values()) if rules_store is not None else []
        rules_version = rules_store.version if rules_store is not None else 0
        reread_slices = rules_version != self._rules_version
        snap = Snapshot()
        claim_pairs: list[ClaimPair] | None = None
        for kind in KINDS:
            store = self.stores.get(kind)
            if store is None:
                continue
            with self._lock:
                dirty = self._dirty.get(kind)
                self._dirty[kind] = {}
            # New DeviceTaintRules change what every slice reads as.
            reread = reread_slices and kind == "ResourceSlice"
            # None: read every object (never read yet, relisted, or read again with new rules)
            changed = None if reread else dirty
            try:
                if changed is None:
                    pairs = self._read_all(kind, store, rules, keep=not reread)
                else:
                    pairs = self._read_changed(kind, store, changed, rules)
            except BaseException:
                with self._lock:
                    self._dirty[kind] = None  # half read: every object again next time
                raise
            if kind == "ResourceSlice":
                # Only now: slices half read with new rules are read with them again.
                self._rules_version = rules_version
                self.slices_dropped += sum(before is not None for before, _ in pairs)
            elif kind == "ResourceClaim" and changed is not None:
                # After a whole read the consumers compare every claim: no pairs to follow.
                claim_pairs = [(_claim(a), _claim(b)) for a, b in pairs]
            snap.extend(kind, self._items[kind].values())
        serial = next_serial()
        snap.claim_changes = ClaimChanges(
            serial,
            since=self._serial if claim_pairs is not None else None,
            changed=tuple(claim_pairs or ()),
        )
        self._serial = serial
        return snap

    def _read(
        self, kind: str, key: str, obj: Mapping[str, object], cached: Read | None, rules: Rules
    ) -> Read:
        """``obj`` as read: ``cached`` if it is the same object, or at the same version."""
        if cached is not None and cached.raw is obj:
            return cached
        version = resource_version(obj)
        if cached is not None and cached.resource_version == version and version:
            return Read(obj, version, cached.item)
        try:
            item = read_object(
                obj, where=f"{kind} {key}", taint_rules=rules, interner=self._interner
            )
        except Exception as exc:  # skipped, reported once per resourceVersion
            self.on_error(kind, key, exc)
            item = None
        return Read(obj, version, item)

    def _read_all(self, kind: str, store: Store, rules: Rules, *, keep: bool) -> list[ItemPair]:
        """Read every object of ``kind`` again, keeping those still cached as read (with
        ``keep``; else each is parsed again); (before, after) of each item that changed,
        deleted ones too."""
        old = self._parsed.get(kind, {})
        fresh: dict[str, Read] = {}
        items: dict[str, object] = {}
        pairs: list[ItemPair] = []
        for key, obj in store.items().items():
            cached = old.get(key)
            read = fresh[key] = self._read(kind, key, obj, cached if keep else None, rules)
            if read.item is not None:
                items[key] = read.item
            before = cached.item if cached is not None else None
            if before is not read.item:
                pairs.append((before, read.item))
        pairs += [(r.item, None) for k, r in old.items() if k not in fresh and r.item is not None]
        self._parsed[kind] = fresh
        self._items[kind] = items
        return pairs

    def _read_changed(
        self, kind: str, store: Store, keys: Mapping[str, None], rules: Rules
    ) -> list[ItemPair]:
        """Read the objects of ``keys`` again; (before, after) of each item that changed."""
        parsed, items = self._parsed[kind], self._items[kind]
        pairs: list[ItemPair] = []
        for key in keys:
            obj = store.get(key)
            cached = parsed.get(key)
            before = cached.item if cached is not None else None
            if obj is None:
                parsed.pop(key, None)
                after = None
            else:
                read = self._read(kind, key, obj, cached, rules)
                parsed[key] = read
                after = read.item
            if after is None:
                items.pop(key, None)
            else:
                items[key] = after
            if before is not after:
                pairs.append((before, after))
        return pairs


def _claim(item: object) -> ClaimInfo | None:
    return item if isinstance(item, ClaimInfo) else None
