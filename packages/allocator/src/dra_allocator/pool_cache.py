"""Per-node pools, and the slices' index, kept from one cluster snapshot to the next.

A node's pools are a function of the cluster's slices, the node (name, labels), the feature
switches and the pool order; allocations do not change them. A caller that builds a new
:class:`~dra_allocator.cluster.Cluster` for every snapshot of the same slices (the allocation
controller does, several times a second while pods are created) would otherwise index the
slices and gather and validate every node's pools again each time, which at a thousand nodes
is most of its work.

The slices are compared by identity: a caller whose parsed slices stay the same objects
until they change (the controller's view) keeps its index and pools until any slice changes,
then indexes and gathers again. The cache holds the index of the slices it was filled from,
so their identities cannot be reused by other objects while it is in use; while the slices
are the same, the index is the same object (what else is derived from the slices can be
kept by its identity).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from .features import Features
from .model import SliceInfo
from .nodes import NodeInfo
from .pools import Pool, PoolID, SliceIndex


class PoolCache:
    """The slices' index, and each node's pools, valid while the slices, features and pool
    order are the same."""

    def __init__(self) -> None:
        """An empty cache."""
        self._index: SliceIndex | None = None
        self._settings: tuple[Features, tuple[PoolID, ...] | None] | None = None
        self._nodes: dict[str, tuple[NodeInfo, list[Pool]]] = {}

    def index(self, slices: Sequence[SliceInfo]) -> SliceIndex:
        """The index of ``slices``: the last one while they are the same objects in the same
        order; else a new one, and every node's pools forgotten."""
        kept = self._index
        if (
            kept is not None
            and len(slices) == len(kept.slices)
            and all(a is b for a, b in zip(slices, kept.slices, strict=True))
        ):
            return kept
        self._index = SliceIndex(slices)
        self._nodes = {}
        return self._index

    def use(
        self,
        index: SliceIndex,
        features: Features,
        pool_order: Sequence[PoolID] | None,
        nodes: Collection[str],
    ) -> None:
        """Serve a cluster of this index (from :meth:`index`) and these nodes: forget every
        node's pools if the index, the features or the pool order differ from the last
        cluster's, and the nodes that are gone."""
        settings = (features, tuple(pool_order) if pool_order is not None else None)
        if index is self._index and settings == self._settings:
            if len(self._nodes) > len(nodes):
                self._nodes = {k: v for k, v in self._nodes.items() if k in nodes}
            return
        self._index = index
        self._settings = settings
        self._nodes = {}

    def pools(self, node: NodeInfo, gather: Callable[[NodeInfo], list[Pool]]) -> list[Pool]:
        """The node's pools: cached if the node is as it was, else ``gather(node)``."""
        entry = self._nodes.get(node.name)
        if entry is not None and entry[0] == node:
            return entry[1]
        pools = gather(node)
        self._nodes[node.name] = (node, pools)
        return pools
