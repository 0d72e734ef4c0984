"""The availability cache: a reconcile after allocations changed looks at the nodes that can
reach the changed devices only, and the cached counts always equal a fresh count."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest
from controller_objects import (
    DRIVER,
    GPU_CLASS,
    MIG_CLASS,
    claim,
    device_class,
    gpu,
    mig,
    node,
    slice_,
    stores,
)
from dra_allocator.cel_engine import CelEngine
from dra_allocator.cluster import Cluster
from dra_allocator.features import Features
from dra_allocator.pool_cache import PoolCache
from dra_allocator.state import StateCache
from dra_api_types.testing import resource_slice
from dra_controller.allocation_controller import AvailableSeries, free_devices
from dra_controller.allocation_controller.availability import AvailabilityCache
from dra_controller.allocation_controller.diagnosis import make_cluster
from dra_controller.allocation_controller.view import ClusterView
from dra_kube_client.informers.store import Store

ENGINE = CelEngine()
NODES = ("n1", "n2", "n3", "n4")


def _devices(node_name: str, variant: int) -> list[dict[str, Any]]:
    """A node's devices; ``variant`` changes them (a taint, a device more or less)."""
    devices = [gpu("gpu-0", "40Gi"), gpu("gpu-1", "80Gi", product="NVIDIA H100")]
    devices.append(mig("mig-0", "1g.5gb"))
    if variant % 3 == 1:
        devices[0] = gpu("gpu-0", "40Gi", taints=[{"key": "xid", "effect": "NoSchedule"}])
    if variant % 3 == 2:
        devices.pop()
    return devices


def _network_slice(rv: int) -> dict[str, Any]:
    """A pool every node reaches (network-attached devices)."""
    devices = [gpu("net-0", "80Gi"), gpu("net-1", "80Gi")][: 1 + rv % 2]
    return resource_slice(
        "net-slice",
        pool="net",
        driver=DRIVER,
        devices=devices,
        resource_version=str(rv),
        spec={"allNodes": True},
    )


def _rack_slice() -> dict[str, Any]:
    """A pool the nodes of rack 1 reach: which nodes count it follows their labels."""
    term = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["1"]}]}
    return resource_slice(
        "rack-slice",
        pool="rack",
        driver=DRIVER,
        devices=[gpu("rack-0", "80Gi")],
        resource_version="1",
        spec={"nodeSelector": {"nodeSelectorTerms": [term]}},
    )


def _labelled(name: str, rack: int) -> dict[str, Any]:
    body = node(name)
    body["metadata"]["labels"] = {"rack": str(rack)}
    body["metadata"]["resourceVersion"] = str(rack + 2)
    return body


class _Controller:
    """The controller's wiring of the caches: one view, pool and state cache across
    reconciles."""

    def __init__(self, st: dict[str, Store]) -> None:
        self.view = ClusterView(stores=st)
        self.pools = PoolCache()
        self.state = StateCache()
        self.cache = AvailabilityCache()

    def cluster(self) -> Cluster:
        return make_cluster(
            self.view.snapshot(),
            engine=ENGINE,
            features=Features(),
            pool_cache=self.pools,
            state_cache=self.state,
        )


def test_an_allocation_looks_at_only_the_nodes_that_reach_its_device(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    st = stores(
        [GPU_CLASS, MIG_CLASS, *(node(n) for n in NODES)]
        + [slice_(n, _devices(n, 0)) for n in NODES]
        + [_network_slice(1)]
    )
    ctl = _Controller(st)
    free_devices(ctl.cluster(), ctl.cache)
    looked: list[str] = []
    real = ctl.cache.node_counts

    def spy(cluster: Cluster, node_name: str, inputs: Any = None) -> Counter[AvailableSeries]:
        looked.append(node_name)
        return real(cluster, node_name, inputs)

    monkeypatch.setattr(ctl.cache, "node_counts", spy)
    st["ResourceClaim"].upsert(claim("a", allocated_on=("n2", "gpu-1")))
    free = free_devices(ctl.cluster(), ctl.cache)
    assert looked == ["n2"]
    assert free[AvailableSeries("n2", "gpu.nvidia.com", "NVIDIA H100")] == 0
    assert free[AvailableSeries("n1", "gpu.nvidia.com", "NVIDIA H100")] == 1

    looked.clear()
    st["ResourceClaim"].upsert(claim("b", allocated_on=("net", "net-0")))
    free_devices(ctl.cluster(), ctl.cache)
    assert sorted(looked) == list(NODES)  # every node reaches the network pool

    looked.clear()
    st["ResourceClaim"].upsert(claim("b", allocated_on=("net", "net-0"), rv="2"))
    free_devices(ctl.cluster(), ctl.cache)
    assert looked == []  # the claim changed, what it holds did not


def _step(rng: random.Random, st: dict[str, Store], rv: int) -> None:
    """One random change of the kind the controller sees."""
    what = rng.choice(("allocate", "allocate", "release", "slice", "node", "class", "net"))
    name = rng.choice(NODES)
    if what == "allocate":
        dev = rng.choice(("gpu-0", "gpu-1", "mig-0"))
        shared = rng.choice((("net", "net-0"), ("rack", "rack-0")))
        pool, dev = shared if rng.random() < 0.3 else (name, dev)
        cls = "mig.nvidia.com" if dev.startswith("mig") else "gpu.nvidia.com"
        st["ResourceClaim"].upsert(
            claim(f"c{rng.randrange(6)}", cls=cls, allocated_on=(pool, dev), rv=str(rv))
        )
    elif what == "release":
        st["ResourceClaim"].delete(f"team/c{rng.randrange(6)}")
    elif what == "slice":
        if rng.random() < 0.2:
            st["ResourceSlice"].delete(f"{name}-slice")
        else:
            st["ResourceSlice"].upsert(slice_(name, _devices(name, rv), rv=str(rv)))
    elif what == "node":
        if rng.random() < 0.3:
            st["Node"].delete(name)
        else:
            st["Node"].upsert(_labelled(name, rv % 3))
    elif what == "class":
        expr = f"device.driver == '{DRIVER}'" + (" && true" if rv % 2 else "")
        st["DeviceClass"].upsert(device_class("any.nvidia.com", expr, rv=str(rv)))
    else:
        st["ResourceSlice"].upsert(_network_slice(rv))


@pytest.mark.parametrize("seed", range(8))
def test_cached_counts_equal_a_fresh_count_after_every_change(seed: int) -> None:
    rng = random.Random(seed)
    st = stores(
        [GPU_CLASS, MIG_CLASS, *(node(n) for n in NODES)]
        + [slice_(n, _devices(n, 0)) for n in NODES]
        + [_rack_slice()]
    )
    ctl = _Controller(st)
    for rv in range(2, 80):
        _step(rng, st, rv)
        cluster = ctl.cluster()
        cached = free_devices(cluster, ctl.cache)
        # A view of its own: another snapshot of the controller's view would break the
        # chain of claim changes its caches follow.
        snap = ClusterView(stores=st).snapshot()
        fresh = free_devices(make_cluster(snap, engine=ENGINE, features=Features()))
        assert cached == fresh, f"seed {seed}, change {rv}"
        # Series present with 0 (a class exhausted on a node) must match too.
        assert set(cached) == set(fresh), f"seed {seed}, change {rv}"


def _share(name: str, memory: str, share_id: str) -> dict[str, Any]:
    """A claim holding a share of ``shared-0`` on n1, consuming ``memory`` of it."""
    body = claim(name, allocated_on=("n1", "shared-0"))
    result = body["status"]["allocation"]["devices"]["results"][0]
    result["shareID"] = share_id
    result["consumedCapacity"] = {"memory": memory}
    return body


def test_a_share_more_of_a_held_device_is_counted() -> None:
    """A device shared by several claims stays held while its consumed capacity grows: the
    cache must still look at its node again."""
    shared = gpu("shared-0", "80Gi", allowMultipleAllocations=True)
    shared["capacity"]["memory"]["requestPolicy"] = {
        "default": "30Gi",
        "validRange": {"min": "10Gi", "step": "10Gi"},
    }
    st = stores([GPU_CLASS, node("n1"), node("n2"), slice_("n1", [shared])])
    ctl = _Controller(st)
    key = AvailableSeries("n1", "gpu.nvidia.com", "NVIDIA A100")
    st["ResourceClaim"].upsert(_share("a", "40Gi", "11111111-2222-3333-4444-555555555555"))
    assert free_devices(ctl.cluster(), ctl.cache)[key] == 1  # 40Gi left: a default share fits
    st["ResourceClaim"].upsert(_share("b", "20Gi", "11111111-2222-3333-4444-666666666666"))
    assert free_devices(ctl.cluster(), ctl.cache)[key] == 0  # 20Gi left
    st["ResourceClaim"].delete("team/b")
    assert free_devices(ctl.cluster(), ctl.cache)[key] == 1
