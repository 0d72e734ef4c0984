"""A cluster snapshot to allocate against: slices, classes, nodes and allocated claims.

It keeps per-node pools between calls, so that filling a large cluster claim after claim
does not redo per-node work (the kube-scheduler keeps the same kind of snapshot between
scheduling cycles).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dra_api_types import AllocationResult

from .allocator import Allocated, Allocator, Unsatisfiable
from .claim_changes import ClaimChanges
from .features import Features
from .model import MODE_EXACT, ClaimInfo, ClassInfo, DeviceID, SliceInfo
from .nodes import NodeInfo
from .pool_cache import PoolCache
from .pools import Pool, PoolID, SliceIndex
from .selectors import SelectorEngine
from .snapshot import Snapshot
from .state import AllocatedState, StateCache

_UNBOUNDED = 1 << 30


@dataclass(frozen=True, slots=True)
class ClusterOutcome:
    """Result of trying nodes in order: the first node that fits, or every failure."""

    allocated: Allocated | None
    failures: list[Unsatisfiable] = field(default_factory=list)


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
        pool_order: Sequence[PoolID] | None = None,
        pool_cache: PoolCache | None = None,
        state_cache: StateCache | None = None,
        claim_changes: ClaimChanges | None = None,
    ) -> None:
        self.features = features or Features()
        # The stable variant's pool order (upstream: Go map order); see SliceIndex.
        self.pool_order = pool_order
        self.classes = {c.name: c for c in classes}
        self.index = pool_cache.index(slices) if pool_cache is not None else SliceIndex(slices)
        self.nodes: dict[str, NodeInfo] = {n.name: n for n in nodes}
        for name in self.index.node_names():
            self.nodes.setdefault(name, NodeInfo(name=name))
        consumable = self.features.consumable_capacity
        if state_cache is None:
            self.state = AllocatedState.from_claims(claims, consumable=consumable)
        else:
            self.state = state_cache.state_for(claims, consumable=consumable, changes=claim_changes)
        # The cache's state is shared with later clusters: copied before a commit changes it.
        self._state_shared = state_cache is not None
        self.allocator = Allocator(
            classes=self.classes, engine=engine, features=self.features, timeout_s=timeout_s
        )
        self._node_pools: dict[str, list[Pool]] = {}
        # Per node whose count was needed: candidate devices nobody holds (_free_count), and
        # per device the nodes counted that can use it, to keep the counts current on commit.
        self._free: dict[str, int] = {}
        self._device_nodes: dict[DeviceID, list[str]] = {}
        self._sorted_nodes = sorted(self.nodes)
        self._pool_cache = pool_cache
        if pool_cache is not None:
            pool_cache.use(self.index, self.features, pool_order, self.nodes)

    @classmethod
    def from_snapshot(
        cls,
        snapshot: Snapshot,
        *,
        engine: SelectorEngine,
        features: Features | None = None,
        timeout_s: float = 10.0,
        pool_order: Sequence[PoolID] | None = None,
        pool_cache: PoolCache | None = None,
        state_cache: StateCache | None = None,
    ) -> Cluster:
        """The cluster of a snapshot: its classes, slices and nodes, and every claim of it
        that is allocated holding its devices (pending ones hold nothing). ``pool_cache``
        keeps the slices' index and per-node pools across snapshots of the same slices,
        ``state_cache`` the allocated state across snapshots of mostly the same claims
        (updated by the snapshot's ``claim_changes`` when they follow its last)."""
        return cls(
            classes=snapshot.classes,
            slices=snapshot.slices,
            nodes=snapshot.nodes,
            claims=snapshot.claims,
            engine=engine,
            features=features,
            timeout_s=timeout_s,
            pool_order=pool_order,
            pool_cache=pool_cache,
            state_cache=state_cache,
            claim_changes=snapshot.claim_changes,
        )

    def node(self, name: str) -> NodeInfo:
        """A known node, or a label-less one of that name."""
        return self.nodes.get(name) or NodeInfo(name=name)

    def node_names(self) -> list[str]:
        """Every known node, in name order (the order nodes are tried)."""
        return list(self._sorted_nodes)

    def pools_for(self, node: NodeInfo) -> list[Pool]:
        """The node's pools (cached)."""
        pools = self._node_pools.get(node.name)
        if pools is None:
            if self._pool_cache is not None:
                pools = self._pool_cache.pools(node, self._gather)
            else:
                pools = self._gather(node)
            self._node_pools[node.name] = pools
        return pools

    def _gather(self, node: NodeInfo) -> list[Pool]:
        return self.index.gather_pools(node, self.features, self.pool_order)

    def _free_count(self, node: NodeInfo) -> int:
        """The node's candidate devices nobody holds (a shareable one counts as unbounded),
        counted on first need and kept current by :meth:`commit` after that."""
        free = self._free.get(node.name)
        if free is None:
            free = 0
            for pool in self.pools_for(node):
                for dev in pool.candidates:
                    self._device_nodes.setdefault(dev.id, []).append(node.name)
                    if dev.allow_multiple and self.features.consumable_capacity:
                        free += _UNBOUNDED
                    elif dev.id not in self.state.devices:
                        free += 1
            self._free[node.name] = free
        return free

    def _hopeless(self, node: NodeInfo, claims: Sequence[ClaimInfo]) -> bool:
        """Whether searching the node can only end unsatisfiable, with no error either.

        True when every candidate device of the node is held and every request wants a
        count of exclusive devices: the search then skips each device as in use before
        evaluating any selector, so it can neither succeed nor hit a CEL runtime error.
        ("All" and admin-access requests look at held devices too, so they are searched.)
        """
        return self._free_count(node) == 0 and all(
            spec.mode == MODE_EXACT and not spec.admin_access
            for claim in claims
            for req in claim.requests
            for spec in (req.first_available or ([req.exact] if req.exact else []))
        )

    def allocate_on(
        self, claims: Sequence[ClaimInfo], node: NodeInfo, *, skip_hopeless: bool = False
    ) -> Allocated | Unsatisfiable:
        """Allocate the claims together on one node (``skip_hopeless``: see
        :meth:`~.allocator.Allocator.allocate`)."""
        return self.allocator.allocate(
            claims,
            node=node,
            pools=self.pools_for(node),
            state=self.state,
            skip_hopeless=skip_hopeless,
        )

    def allocate(self, claims: Sequence[ClaimInfo], *, node: str | None = None) -> ClusterOutcome:
        """Allocate the claims together on ``node``, or on the first node (by name) that fits.

        Invalid pools make a node unsatisfiable, not an error: the kube-scheduler marks the
        pod unschedulable ("invalid resource pools were encountered") and waits for the
        driver to fix its slices; the failures' ``invalid_pools`` say which.
        """
        if node is not None:
            outcome = self.allocate_on(claims, self.node(node))
            if isinstance(outcome, Allocated):
                return ClusterOutcome(allocated=outcome)
            return ClusterOutcome(allocated=None, failures=[outcome])
        self.allocator.validate(claims)
        failures: list[Unsatisfiable] = []
        # A node with a few free devices, too few for the claims, is still searched: the
        # search can end in an error there (a CEL runtime error, an "All" request on a
        # pool being updated), and upstream raises it (the Go-oracle differential test
        # found this). Only nodes where nothing can be looked at are skipped.
        for name in self._sorted_nodes:
            info = self.nodes[name]
            if self._hopeless(info, claims):
                continue
            outcome = self.allocate_on(claims, info)
            if isinstance(outcome, Allocated):
                return ClusterOutcome(allocated=outcome, failures=failures)
            failures.append(outcome)
        return ClusterOutcome(allocated=None, failures=failures)

    def commit(self, claims: Sequence[ClaimInfo], allocated: Allocated) -> None:
        """Record the allocations as done (claims' status and the allocated state)."""
        if self._state_shared:
            self.state = self.state.copy()
            self._state_shared = False
        for claim, written in zip(claims, allocated.allocations, strict=True):
            # The allocator writes results as the report's JSON; the claim keeps them typed.
            allocation = AllocationResult.from_dict(written)
            newly = {
                (r.driver, r.pool, r.device)
                for r in allocation.devices.results or []
                if not r.admin_access and not (r.share_id and self.features.consumable_capacity)
            }
            fresh = {dev_id for dev_id in newly if dev_id not in self.state.devices}
            self.state.add_allocation(claim.key, allocation)
            claim.allocation = allocation
            for dev_id in fresh:
                for node_name in self._device_nodes.get(dev_id, ()):
                    self._free[node_name] -= 1
