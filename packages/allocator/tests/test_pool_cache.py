"""PoolCache: a node's pools carry over to the next cluster only while their inputs are the
same (the slices as objects, the node, the features and the pool order)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from allocation_builders import DEFAULT_CLASS, device_class, node, resource_slice
from dra_allocator.cel_engine import CelEngine
from dra_allocator.cluster import Cluster
from dra_allocator.features import Features
from dra_allocator.model import SliceInfo, parse_objects
from dra_allocator.nodes import NodeInfo
from dra_allocator.pool_cache import PoolCache
from dra_allocator.pools import Pool

ZONE_A = {
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
        ]
    }
}


def _objects() -> tuple[list[SliceInfo], list[NodeInfo]]:
    _, slices, _, nodes = parse_objects(
        [
            device_class(DEFAULT_CLASS),
            resource_slice({"name": "s1", "node": "n1", "devices": [{"name": "g0"}]}),
            resource_slice({"name": "s2", "node": "n2", "devices": [{"name": "g0"}]}),
            # A network-attached pool: which nodes reach it depends on their labels.
            resource_slice(
                {"name": "fabric", "pool": "fabric", "devices": [{"name": "f0"}], **ZONE_A}
            ),
            node({"name": "n1", "labels": {"zone": "a"}}),
            node({"name": "n2", "labels": {"zone": "b"}}),
        ]
    )
    return slices, [NodeInfo.from_dict(n) for n in nodes]


def _pools(
    cache: PoolCache,
    slices: Sequence[SliceInfo],
    nodes: Sequence[NodeInfo],
    features: Features | None = None,
) -> dict[str, list[Pool]]:
    cluster = Cluster(
        classes=[],
        slices=slices,
        nodes=nodes,
        engine=CelEngine(),
        features=features,
        pool_cache=cache,
    )
    return {name: cluster.pools_for(cluster.node(name)) for name in cluster.node_names()}


def _names(pools: list[Pool]) -> list[str]:
    return [str(p) for p in pools]


def test_pools_carry_over_while_slices_and_nodes_are_the_same() -> None:
    slices, nodes = _objects()
    cache = PoolCache()
    first = _pools(cache, slices, nodes)
    assert _names(first["n1"]) == ["gpu.example.com/fabric", "gpu.example.com/n1"]
    assert _names(first["n2"]) == ["gpu.example.com/n2"]
    # The next snapshot: the same slice objects, node objects parsed anew but equal.
    again = _pools(cache, slices, [replace(n) for n in nodes])
    assert all(again[name] is first[name] for name in first)


def test_a_node_whose_labels_changed_gathers_again_alone() -> None:
    slices, nodes = _objects()
    cache = PoolCache()
    first = _pools(cache, slices, nodes)
    moved = [nodes[0], replace(nodes[1], labels={"zone": "a"})]
    after = _pools(cache, slices, moved)
    assert after["n1"] is first["n1"]
    assert _names(after["n2"]) == ["gpu.example.com/fabric", "gpu.example.com/n2"]


def test_any_slice_replaced_gathers_every_node_again() -> None:
    slices, nodes = _objects()
    cache = PoolCache()
    first = _pools(cache, slices, nodes)
    # The same content parsed again (a new resourceVersion): a new object.
    fresh_s2 = replace(slices[1])
    after = _pools(cache, [slices[0], fresh_s2, slices[2]], nodes)
    assert all(after[name] is not first[name] for name in first)
    assert [s for p in after["n2"] for s in p.slices] == [fresh_s2]


def test_other_features_or_fewer_slices_gather_again() -> None:
    slices, nodes = _objects()
    cache = PoolCache()
    first = _pools(cache, slices, nodes)
    other = _pools(cache, slices, nodes, Features(partitionable_devices=False))
    assert all(other[name] is not first[name] for name in first)
    fewer = _pools(cache, slices[1:], nodes)
    assert _names(fewer["n1"]) == ["gpu.example.com/fabric"]


def test_nodes_that_are_gone_are_forgotten() -> None:
    slices, nodes = _objects()
    cache = PoolCache()
    # A node with no slices of its own, in the fabric's zone.
    _pools(cache, slices, [*nodes, NodeInfo(name="n3", labels={"zone": "a"})])
    assert set(cache._nodes) == {"n1", "n2", "n3"}
    _pools(cache, slices, nodes)
    assert set(cache._nodes) == {"n1", "n2"}
