"""Per-node pools kept from one cluster snapshot to the next.

A node's pools are a function of the cluster's slices, the node (name, labels), the feature
switches and the pool order; allocations do not change them. A caller that builds a new
:class:`~dra_allocator.cluster.Cluster` for every snapshot of the same slices (the allocation
controller does, several times a second while pods are created) would otherwise gather and
validate every node's pools again each time, which at a thousand nodes is most of its work.

The slices are compared by identity: a caller whose parsed slices stay the same objects
until they change (the controller's view) keeps its pools until any slice changes, then
gathers again. The cache holds the slices it was filled from, so their identities cannot be
reused by other objects while it is in use.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from .features import Features
from .model import SliceInfo
from .nodes import NodeInfo
from .pools import Pool, PoolID


class PoolCache:
    """Each node's pools, valid while the slices, features and pool order are the same."""

    def __init__(self) -> None:
        """An empty cache."""
        self._slices: tuple[SliceInfo, ...] = ()
        self._settings: tuple[Features, tuple[PoolID, ...] | None] | None = None
        self._nodes: dict[str, tuple[NodeInfo, list[Pool]]] = {}

    def use(
        self,
        slices: Sequence[SliceInfo],
        features: Features,
        pool_order: Sequence[PoolID] | None,
        nodes: Collection[str],
    ) -> None:
        """Serve a cluster of these slices and nodes: forget everything if the slices
        (by identity), the features or the pool order differ from the last cluster's, and
        the nodes that are gone."""
        settings = (features, tuple(pool_order) if pool_order is not None else None)
        same = settings == self._settings and len(slices) == len(self._slices)
        if same and all(a is b for a, b in zip(slices, self._slices, strict=True)):
            if len(self._nodes) > len(nodes):
                self._nodes = {k: v for k, v in self._nodes.items() if k in nodes}
            return
        self._slices = tuple(slices)
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
