"""Free devices per node and DeviceClass, as the allocator sees them.

A device is free for a node when a claim with no special tolerations could get it now:
it is a candidate of one of the node's pools (incomplete and invalid pools have none),
not held by an allocated claim, its shared counters still allow it, no ``NoSchedule`` or
``NoExecute`` taint is on it, and (consumable capacity) its default share still fits.
It counts for every DeviceClass whose selectors all match it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from dra_allocator import capacity as cap
from dra_allocator.cluster import Cluster
from dra_allocator.counters import CounterTracker
from dra_allocator.features import Features
from dra_allocator.model import DeviceID, DeviceInfo
from dra_allocator.nodes import NodeInfo
from dra_allocator.pools import Pool, SliceIndex
from dra_allocator.selectors import SelectorCompileFailure, evaluate
from dra_allocator.taints import untolerated_taint

#: ``attribute`` label when a device has neither a product name nor a MIG profile.
UNKNOWN_ATTRIBUTE = "unknown"


class AvailableSeries(NamedTuple):
    """One series of ``node_dra_resource_available``."""

    node: str
    resource_class: str
    attribute: str


def device_attribute(dev: DeviceInfo) -> str:
    """The product name, or the MIG profile of a MIG device (the ``attribute`` label)."""
    values = {key.rsplit("/", 1)[-1]: value[1] for key, value in dev.attributes.items()}
    if str(values.get("type", "")).lower() == "mig" and values.get("profile"):
        return str(values["profile"])
    product = values.get("productName") or values.get("profile")
    return str(product) if product else UNKNOWN_ATTRIBUTE


def _is_free(cluster: Cluster, dev: DeviceInfo, counters: CounterTracker, pool: Pool) -> bool:
    state = cluster.state
    feats = cluster.features
    if dev.id in state.devices:
        return False
    if dev.binding_conditions and not feats.binding_and_status:
        return False
    if dev.consumes_counters:
        if not feats.partitionable_devices or not counters.try_consume(dev, pool):
            return False
        counters.release(dev, pool)
    if feats.device_taints and untolerated_taint(dev, ()) is not None:
        return False
    if dev.allow_multiple and feats.consumable_capacity:
        fit = cap.fits(
            dev,
            None,
            allocated=state.capacity.get(dev.id),
            allocating=None,
            fractional=cluster.features.fractional_range,
        )
        return fit is True
    return True


def _matches(cluster: Cluster, class_name: str, dev: DeviceInfo) -> bool:
    cls = cluster.classes[class_name]
    for expr in cls.selectors:
        if expr is None:
            return False
        try:
            value = evaluate(cluster.allocator.engine, expr, dev)
        except SelectorCompileFailure:
            return False
        if value is not True:
            return False
    return True


@dataclass(slots=True)
class _NodeEntry:
    key: tuple[object, ...]
    # Kept so that the ids in ``key`` cannot be reused by other objects while cached: the
    # classes here, the slices through ``pools``.
    classes: object
    counts: Counter[AvailableSeries]
    # The pools the counts are of, and their candidates' ids (the same while the pools
    # are): all of them, and those of shareable devices.
    pools: list[Pool]
    ids: tuple[DeviceID, ...]
    shareable: tuple[DeviceID, ...]


class AvailabilityCache:
    """Each node's counts, kept while nothing they depend on changed, and their sum.

    A node's free devices depend on its pools' slices, the DeviceClasses, which of its
    devices are allocated (exclusively or shared, with their consumed capacity) and the
    feature gates. Parsed slices and classes are the same objects until they change (the
    controller's view), so their identities stand for their content; so do the pools of a
    cluster given a :class:`~dra_allocator.pool_cache.PoolCache`.

    While the cluster-wide inputs (slices, classes, nodes, features) stay as they were, only
    allocations change, and :func:`free_devices` looks at only the nodes that can reach a
    device whose allocation changed: at 1,000 nodes, checking every node's key was the
    largest part of a reconcile (docs/scale.md). The slices are the same while the cluster's
    index is (clusters built with one pool cache share it); clusters built without one are
    counted node by node, each node's key checked.
    """

    def __init__(self) -> None:
        """An empty cache."""
        self._nodes: dict[str, _NodeEntry] = {}
        # Every node's counts together (a series names its node: the nodes' are disjoint).
        self._total: dict[AvailableSeries, int] = {}
        # What the last pass saw, to tell which nodes the next one must look at.
        self._world: _World | None = None
        self._held: frozenset[DeviceID] = frozenset()
        self._capacity: dict[DeviceID, tuple[tuple[str, object], ...]] = {}
        # Device -> the nodes whose pools offer it (several for network-attached devices).
        self._device_nodes: dict[DeviceID, list[str]] = {}

    def node_counts(
        self, cluster: Cluster, node_name: str, inputs: _Inputs | None = None
    ) -> Counter[AvailableSeries]:
        """The node's counts, recomputed only when their inputs changed (``inputs``: the
        cluster-wide ones, which :func:`free_devices` makes once for every node)."""
        pools = cluster.pools_for(cluster.node(node_name))
        state = cluster.state
        if inputs is None:
            inputs = _Inputs.of(cluster)
        entry = self._nodes.get(node_name)
        if entry is not None and entry.pools is pools:
            ids, shareable = entry.ids, entry.shareable
        else:
            devices = [d for p in pools for d in p.candidates]
            ids = tuple(d.id for d in devices)
            shareable = tuple(d.id for d in devices if d.allow_multiple)
        held = inputs.held
        key = (
            tuple(id(s) for p in pools for s in p.slices),
            inputs.class_ids,
            tuple(i in held for i in ids),
            tuple(_capacity_key(state.capacity.get(i)) for i in shareable),
            cluster.features,
        )
        if entry is not None and entry.key == key:
            return entry.counts
        counts = _count_node(cluster, node_name, pools)
        self._nodes[node_name] = _NodeEntry(key, inputs.classes, counts, pools, ids, shareable)
        return counts

    def total(self, cluster: Cluster) -> Counter[AvailableSeries]:
        """Every node's counts, as :func:`free_devices` gives them."""
        inputs = _Inputs.of(cluster)
        capacity = {i: _capacity_key(c) for i, c in cluster.state.capacity.items()}
        world = _World.of(cluster, inputs)
        if self._world is not None and self._world.same(world):
            changed = inputs.held ^ self._held
            changed |= {
                i
                for i in capacity.keys() | self._capacity.keys()
                if capacity.get(i) != self._capacity.get(i)
            }
            touched = {n for i in changed for n in self._device_nodes.get(i, ())}
            for node_name in sorted(touched):
                self._refresh(cluster, node_name, inputs)
        else:
            names = cluster.node_names()
            for node_name in names:
                self._refresh(cluster, node_name, inputs)
            self._retain(set(names))
            self._device_nodes = {}
            for node_name, entry in self._nodes.items():
                for i in entry.ids:
                    self._device_nodes.setdefault(i, []).append(node_name)
        self._world, self._held, self._capacity = world, inputs.held, capacity
        return Counter(self._total)

    def _refresh(self, cluster: Cluster, node_name: str, inputs: _Inputs) -> None:
        old = self._nodes.get(node_name)
        counts = self.node_counts(cluster, node_name, inputs)
        if old is not None and old.counts is counts:
            return
        if old is not None:
            for series in old.counts:
                self._total.pop(series, None)
        self._total.update(counts)

    def _retain(self, nodes: set[str]) -> None:
        """Forget nodes that are gone, and their series."""
        if len(self._nodes) > len(nodes):
            for name in [n for n in self._nodes if n not in nodes]:
                for series in self._nodes.pop(name).counts:
                    self._total.pop(series, None)


def _capacity_key(consumed: Mapping[str, object] | None) -> tuple[tuple[str, object], ...]:
    """A device's consumed capacity, comparable across reconciles."""
    return tuple(sorted((consumed or {}).items()))


def _same_objects(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


@dataclass(frozen=True, slots=True)
class _World:
    """The cluster-wide inputs of every node's counts but the allocations."""

    # The objects themselves, not their ids: held here, they cannot be freed and their ids
    # taken by others.
    index: SliceIndex
    classes: tuple[object, ...]
    features: Features
    nodes: dict[str, NodeInfo]

    @classmethod
    def of(cls, cluster: Cluster, inputs: _Inputs) -> _World:
        return cls(cluster.index, inputs.classes, cluster.features, cluster.nodes)

    def same(self, other: _World) -> bool:
        """Whether ``other`` has the same slices (the same index: a cluster's pool cache
        keeps it while the slices are the same objects, parsed once and replaced when they
        change), the same classes (objects), features and nodes."""
        return (
            self.index is other.index
            and _same_objects(self.classes, other.classes)
            and self.features == other.features
            and self.nodes == other.nodes
        )


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What every node's key reads from the cluster as a whole."""

    classes: tuple[object, ...]
    class_ids: tuple[int, ...]
    # Devices allocated exclusively or shared (AllocatedState.is_allocated).
    held: frozenset[DeviceID]

    @classmethod
    def of(cls, cluster: Cluster) -> _Inputs:
        classes = tuple(cluster.classes[n] for n in sorted(cluster.classes))
        state = cluster.state
        held = frozenset(state.devices | state.shared_devices)
        return cls(classes, tuple(id(c) for c in classes), held)


def _count_node(cluster: Cluster, node_name: str, pools: list[Pool]) -> Counter[AvailableSeries]:
    counts: Counter[AvailableSeries] = Counter()
    classes = sorted(cluster.classes)
    counters = CounterTracker(cluster.state, {})
    for pool in pools:
        for dev in pool.candidates:
            attribute = device_attribute(dev)
            free = _is_free(cluster, dev, counters, pool)
            for class_name in classes:
                if _matches(cluster, class_name, dev):
                    key = AvailableSeries(node_name, class_name, attribute)
                    # Present with 0 when none is free: "exhausted" is visible as 0.
                    counts[key] += 1 if free else 0
    return counts


def free_devices(
    cluster: Cluster, cache: AvailabilityCache | None = None
) -> Counter[AvailableSeries]:
    """Free devices per (node, class, attribute); every class appears for nodes with devices."""
    cache = cache if cache is not None else AvailabilityCache()
    return cache.total(cluster)
