"""A cluster snapshot to allocate against: slices, classes, nodes and allocated claims.

It keeps per-node pools and free-device counts between calls, so that filling a large
cluster claim after claim does not redo per-node work (the kube-scheduler keeps the same
kind of snapshot between scheduling cycles).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .allocator import Allocated, Allocator, Unsatisfiable
from .errors import InvalidPoolError
from .features import Features
from .model import MODE_EXACT, ClaimInfo, ClassInfo, DeviceID, SliceInfo
from .nodes import NodeInfo
from .pools import Pool, SliceIndex
from .selectors import SelectorEngine
from .state import AllocatedState

_UNBOUNDED = 1 << 30


@dataclass(frozen=True, slots=True)
class ClusterOutcome:
    """Result of trying nodes in order: the first node that fits, or every failure."""

    allocated: Allocated | None
    failures: list[Unsatisfiable] = field(default_factory=list)
    skipped_full: int = 0


@dataclass(slots=True)
class _NodeEntry:
    pools: list[Pool]
    free: int


class Cluster:
    """Allocation against a fixed set of slices and classes, with changing allocations."""

    def __init__(
        self,
        *,
        classes: Iterable[ClassInfo],
        slices: Sequence[SliceInfo],
        nodes: Iterable[NodeInfo] = (),
        claims: Iterable[ClaimInfo] = (),
        engine: SelectorEngine,
        features: Features | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.features = features or Features()
        self.classes = {c.name: c for c in classes}
        self.index = SliceIndex(slices)
        self.nodes: dict[str, NodeInfo] = {n.name: n for n in nodes}
        for name in self.index.node_names():
            self.nodes.setdefault(name, NodeInfo(name=name))
        self.state = AllocatedState.from_claims(claims)
        self.allocator = Allocator(
            classes=self.classes, engine=engine, features=self.features, timeout_s=timeout_s
        )
        self._node_cache: dict[str, _NodeEntry] = {}
        self._device_nodes: dict[DeviceID, list[str]] = {}
        self._sorted_nodes = sorted(self.nodes)
        # Nodes before this position have no unallocated device left. Devices are only
        # ever added to the allocated state, so a full node stays full.
        self._first_not_full = 0

    def node(self, name: str) -> NodeInfo:
        """A known node, or a label-less one of that name."""
        return self.nodes.get(name) or NodeInfo(name=name)

    def node_names(self) -> list[str]:
        """Every known node, in name order (the order nodes are tried)."""
        return list(self._sorted_nodes)

    def pools_for(self, node: NodeInfo) -> list[Pool]:
        """The node's pools (cached)."""
        return self._entry(node).pools

    def _entry(self, node: NodeInfo) -> _NodeEntry:
        entry = self._node_cache.get(node.name)
        if entry is None:
            pools = self.index.gather_pools(node, self.features)
            free = 0
            for pool in pools:
                for dev in pool.candidates:
                    self._device_nodes.setdefault(dev.id, []).append(node.name)
                    if dev.allow_multiple and self.features.consumable_capacity:
                        # One shareable device can serve several requests: no bound.
                        free += _UNBOUNDED
                    elif dev.id not in self.state.devices:
                        free += 1
            entry = _NodeEntry(pools=pools, free=free)
            self._node_cache[node.name] = entry
        return entry

    def allocate_on(self, claims: Sequence[ClaimInfo], node: NodeInfo) -> Allocated | Unsatisfiable:
        """Allocate the claims together on one node."""
        return self.allocator.allocate(
            claims, node=node, pools=self.pools_for(node), state=self.state
        )

    def allocate(self, claims: Sequence[ClaimInfo], *, node: str | None = None) -> ClusterOutcome:
        """Allocate the claims together on ``node``, or on the first node (by name) that fits.

        Raises ``InvalidPoolError`` when no node fits and invalid pools were seen, like the
        scheduler surfaces invalid pools only when allocation fails everywhere.
        """
        if node is not None:
            outcome = self.allocate_on(claims, self.node(node))
            if isinstance(outcome, Allocated):
                return ClusterOutcome(allocated=outcome)
            self._raise_invalid([outcome])
            return ClusterOutcome(allocated=None, failures=[outcome])
        self.allocator.validate(claims)
        needed = _min_exclusive_devices(claims)
        failures: list[Unsatisfiable] = []
        skipped = 0
        names = self._sorted_nodes
        start = self._first_not_full if needed > 0 else 0
        for position in range(start, len(names)):
            info = self.nodes[names[position]]
            entry = self._entry(info)
            if entry.free < needed:
                # Fewer unallocated devices than the claims need in any case: skip the
                # search (the node stays unsatisfiable whatever the search would try).
                if entry.free <= 0 and position == self._first_not_full:
                    self._first_not_full += 1
                skipped += 1
                continue
            outcome = self.allocate_on(claims, info)
            if isinstance(outcome, Allocated):
                return ClusterOutcome(
                    allocated=outcome, failures=failures, skipped_full=skipped + start
                )
            failures.append(outcome)
        self._raise_invalid(failures)
        return ClusterOutcome(allocated=None, failures=failures, skipped_full=skipped + start)

    @staticmethod
    def _raise_invalid(failures: Sequence[Unsatisfiable]) -> None:
        invalid = sorted({p for f in failures for p in f.invalid_pools})
        if invalid:
            raise InvalidPoolError(
                "invalid resource pools were encountered: " + "; ".join(invalid),
                object_ref="ResourceSlice",
                field="spec.devices",
            )

    def commit(self, claims: Sequence[ClaimInfo], allocated: Allocated) -> None:
        """Record the allocations as done (claims' status and the allocated state)."""
        for claim, allocation in zip(claims, allocated.allocations, strict=True):
            newly = [
                (r.get("driver", ""), r.get("pool", ""), r.get("device", ""))
                for r in (allocation.get("devices") or {}).get("results") or []
                if not r.get("adminAccess") and not r.get("shareID")
            ]
            fresh = {dev_id for dev_id in newly if dev_id not in self.state.devices}
            self.state.add_allocation(claim.key, allocation)
            claim.allocation = allocation
            for dev_id in fresh:
                for node_name in self._device_nodes.get(dev_id, ()):
                    self._node_cache[node_name].free -= 1


def _min_exclusive_devices(claims: Sequence[ClaimInfo]) -> int:
    """A lower bound on distinct unallocated devices needed (admin access and "All" excluded)."""
    total = 0
    for claim in claims:
        for req in claim.requests:
            specs = list(req.first_available) or ([req.exact] if req.exact else [])
            counts = [
                s.count if s.mode == MODE_EXACT and not s.admin_access and s.count > 0 else 0
                for s in specs
            ]
            total += min(counts) if counts else 0
    return total
