"""Resource pools as seen from one node: generations, completeness, validity, order.

Only the newest generation of a pool counts. A pool whose slices are not all published
yet is incomplete (never allocated from; fatal for "All" requests). A pool with duplicate
device names or dangling counter references is invalid. Pools are ordered by
(driver, pool), slices by name, devices in slice order: the order the search tries them.
Upstream's stable allocator sorts nothing: slices stay in the order they were listed and
pools come in Go map order (random per call); here they come in the order they were first
listed (the likeliest of Go's orders for a small map), or in an explicit ``pool_order``
(the differential test tries the orders Go may have used). Kubernetes 1.35 does the same
in every variant; its experimental one lists slices with binding-condition devices last.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from dra_api_types import Amount, NodeSelector

from .features import STABLE, Features
from .model import DeviceInfo, SliceInfo
from .nodes import NodeInfo, node_selector_matches

PoolID = tuple[str, str]

#: Up to this minor release upstream keeps slices in the order it gathered them.
INPUT_SLICE_ORDER_UNTIL = 35


@dataclass(eq=False, slots=True)
class Pool:
    """One pool of devices reachable from a node."""

    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[SliceInfo] = field(default_factory=list)
    slices_not_targeting_node: list[SliceInfo] = field(default_factory=list)
    counter_sets: dict[str, dict[str, Amount]] = field(default_factory=dict)
    # Devices the search may pick from, in search order; per-device node selection applied.
    candidates: list[DeviceInfo] = field(default_factory=list)

    @property
    def id(self) -> PoolID:
        """(driver, pool name)."""
        return (self.driver, self.name)

    def __str__(self) -> str:
        return f"{self.driver}/{self.name}"

    def all_devices(self) -> Iterable[DeviceInfo]:
        """Every device of the pool's current generation, targeting this node or not."""
        for slc in (*self.slices, *self.slices_not_targeting_node):
            yield from slc.devices


def node_matches(
    node: NodeInfo, *, node_name: str, all_nodes: bool, selector: NodeSelector | None, where: str
) -> bool:
    """The NodeMatches rule: a node name, all nodes, or a node selector."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node_selector_matches(selector, node, where=where)
    return False


class SliceIndex:
    """All slices of a cluster, indexed for fast per-node pool gathering."""

    def __init__(self, slices: Sequence[SliceInfo]) -> None:
        self.slices = list(slices)
        self.by_node: dict[str, list[SliceInfo]] = defaultdict(list)
        self.shared: list[SliceInfo] = []
        self.by_pool: dict[PoolID, list[SliceInfo]] = defaultdict(list)
        for slc in self.slices:
            self.by_pool[(slc.driver, slc.pool)].append(slc)
            if slc.node_name:
                self.by_node[slc.node_name].append(slc)
            else:
                self.shared.append(slc)

    @cached_property
    def binding_slices_last(self) -> list[SliceInfo]:
        """1.35's experimental listing: slices with binding-condition devices (counter-set
        slices aside) after the others, each group as listed."""
        return sorted(self.slices, key=_defers_binding)

    def node_names(self) -> set[str]:
        """Names of nodes that have node-local slices."""
        return set(self.by_node)

    def gather_pools(
        self, node: NodeInfo, features: Features, pool_order: Sequence[PoolID] | None = None
    ) -> list[Pool]:
        """The pools whose devices are reachable from the node, in search order.

        ``pool_order`` ranks pools where upstream's order is random (unranked ones last).
        """
        stable = features.variant == STABLE
        random_order = features.random_pool_order
        grouped: dict[PoolID, list[SliceInfo]] = {}
        # Where upstream ranges over a Go map of pools, it looks at every slice (counter
        # sets of other nodes' pools included) in listing order; the incubating variant of
        # 1.36+ at the node's own and the node-less ones.
        listed: Sequence[SliceInfo] = (
            self.slices if random_order else (*self.by_node.get(node.name, ()), *self.shared)
        )
        if features.kube_minor <= INPUT_SLICE_ORDER_UNTIL and features.variant_knows_capacity:
            # 1.35's experimental variant adds slices with binding conditions after the rest.
            listed = self.binding_slices_last
        for slc in listed:
            if not features.partitionable_devices and (
                slc.per_device_node_selection or slc.shared_counters
            ):
                continue
            if not _slice_relevant(slc, node):
                continue
            key = (slc.driver, slc.pool)
            current = grouped.get(key)
            if current is None or slc.generation > current[0].generation:
                grouped[key] = [slc]
            elif slc.generation == current[0].generation:
                current.append(slc)
        # A Go map of at most 8 entries is walked from a random slot of its 8: in insertion
        # order most often, so that order stands for the random one (a sorted one where
        # upstream sorts).
        keys = list(grouped) if random_order else sorted(grouped)
        if random_order and pool_order is not None:
            rank = {pool_id: i for i, pool_id in enumerate(pool_order)}
            keys.sort(key=lambda k: rank.get(k, len(rank)))
        pools: list[Pool] = []
        for key in keys:
            slices = grouped[key]
            generation = slices[0].generation
            expected = slices[0].slice_count
            all_slices: list[SliceInfo] | None = None
            if len(slices) != expected:
                siblings = self.by_pool[key]
                if any(s.generation > generation for s in siblings):
                    # The driver is replacing this generation: ignore the stale one.
                    continue
                all_slices = [s for s in siblings if s.generation == generation]
                if len(all_slices) != expected:
                    pools.append(Pool(driver=key[0], name=key[1], incomplete=True))
                    continue
            # 1.36 sorts a pool's slices by name; 1.35 and the stable variant keep the listed order.
            by_name = not stable and features.kube_minor > INPUT_SLICE_ORDER_UNTIL
            pools.append(_build_pool(key, slices, all_slices, node, features, by_name=by_name))
        if not features.variant_knows_capacity:
            return pools
        # Pools offering devices with binding conditions are tried last (both groups stay
        # in pool order), so that devices which can be used at once are preferred.
        return [p for p in pools if not _has_binding_conditions(p)] + [
            p for p in pools if _has_binding_conditions(p)
        ]


def _defers_binding(slc: SliceInfo) -> bool:
    return not slc.shared_counters and any(d.binding_conditions for d in slc.devices)


def _has_binding_conditions(pool: Pool) -> bool:
    return any(dev.binding_conditions for slc in pool.slices for dev in slc.devices)


def _slice_relevant(slc: SliceInfo, node: NodeInfo) -> bool:
    if slc.shared_counters:
        # Counter sets are needed whatever node the devices consuming them are on.
        return True
    where = f"ResourceSlice {slc.name}: spec.nodeSelector"
    if slc.node_name or slc.all_nodes or slc.node_selector is not None:
        return node_matches(
            node,
            node_name=slc.node_name,
            all_nodes=slc.all_nodes,
            selector=slc.node_selector,
            where=where,
        )
    if slc.per_device_node_selection:
        return any(_device_on_node(dev, node) for dev in slc.devices)
    # Some future way of node selection: not understood, so not usable.
    return False


def _device_on_node(dev: DeviceInfo, node: NodeInfo) -> bool:
    return node_matches(
        node,
        node_name=dev.node_name,
        all_nodes=dev.all_nodes,
        selector=dev.node_selector,
        where=f"{dev.slice.ref}: device {dev.name} nodeSelector",
    )


def _build_pool(
    key: PoolID,
    slices: list[SliceInfo],
    all_slices: list[SliceInfo] | None,
    node: NodeInfo,
    features: Features,
    *,
    by_name: bool,
) -> Pool:
    pool = Pool(driver=key[0], name=key[1])
    ordered = sorted(slices, key=lambda s: s.name) if by_name else list(slices)
    if features.partitionable_devices:
        device_slices = [s for s in ordered if not s.shared_counters]
        counter_slices = [s for s in ordered if s.shared_counters]
    else:
        device_slices = ordered
        counter_slices = []
    seen: set[str] = set()
    for slc in device_slices:
        for dev in slc.devices:
            if dev.name in seen:
                return _invalid(pool, f"duplicate device name {dev.name}")
            seen.add(dev.name)
    pool.slices = device_slices
    if features.partitionable_devices:
        for slc in counter_slices:
            for cs_name, counters in slc.shared_counters:
                if cs_name in pool.counter_sets:
                    return _invalid(pool, f"duplicate counter set name {cs_name}")
                pool.counter_sets[cs_name] = dict(counters)
        reason = _check_counter_refs(pool.counter_sets, device_slices)
        if reason:
            return _invalid(pool, reason)
        if all_slices is not None and len(all_slices) != len(slices):
            names = {s.name for s in slices}
            rest = [s for s in all_slices if s.name not in names and not s.shared_counters]
            pool.slices_not_targeting_node = sorted(rest, key=lambda s: s.name) if by_name else rest
            reason = _check_counter_refs(pool.counter_sets, pool.slices_not_targeting_node)
            if reason:
                return _invalid(pool, reason)
    for slc in pool.slices:
        if slc.per_device_node_selection:
            pool.candidates.extend(d for d in slc.devices if _device_on_node(d, node))
        else:
            pool.candidates.extend(slc.devices)
    return pool


def _invalid(pool: Pool, reason: str) -> Pool:
    pool.invalid = True
    pool.invalid_reason = reason
    pool.slices = []
    pool.candidates = []
    return pool


def _check_counter_refs(
    counter_sets: dict[str, dict[str, Amount]], slices: Iterable[SliceInfo]
) -> str:
    for slc in slices:
        for dev in slc.devices:
            for cs_name, counters in dev.consumes_counters:
                cs = counter_sets.get(cs_name)
                if cs is None:
                    return f"counter set {cs_name} not found"
                for cname, _ in counters:
                    if cname not in cs:
                        return f"counter {cname} not found in counter set {cs_name}"
    return ""
