"""The conformance table: every allocator rule, each case with the exact devices expected.

Cases live in ``conformance/cases.yaml`` (compact notation, see ``allocation_builders``).
A case has either one ``expect`` or a list of ``steps``; a successful step is committed, so
later steps see its devices as allocated.

Each case also runs on pools and an allocated state carried over from an earlier cluster of
the same slices and nodes (a :class:`~dra_allocator.pool_cache.PoolCache` and a
:class:`~dra_allocator.state.StateCache`, as the allocation controller keeps them between
snapshots): the outcome must be the same, and the steps' commits must not change the
cache's state.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from allocation_builders import DRIVER, case_objects
from dra_allocator import errors
from dra_allocator.cel_engine import CelEngine
from dra_allocator.cluster import Cluster
from dra_allocator.features import Features, parse_kube_version
from dra_allocator.model import ClaimInfo, parse_objects
from dra_allocator.nodes import NodeInfo
from dra_allocator.pool_cache import PoolCache
from dra_allocator.state import StateCache

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "conformance" / "cases.yaml").read_text(encoding="utf-8")
)


def device_ref(result: dict[str, Any]) -> str:
    """``request=pool/device`` (driver spelled out unless it is the default one)."""
    prefix = "" if result["driver"] == DRIVER else f"{result['driver']}/"
    return f"{result['request']}={prefix}{result['pool']}/{result['device']}"


def _run_step(cluster: Cluster, claims: dict[str, Any], step: dict[str, Any]) -> None:
    names = step.get("allocate")
    if names:
        pending = [claims[n if "/" in n else f"default/{n}"] for n in names]
    else:
        pending = [c for c in claims.values() if c.allocation is None]
    expect = step["expect"]
    if "error" in expect:
        with pytest.raises(getattr(errors, expect["error"])) as info:
            cluster.allocate(pending, node=step.get("node"))
        for fragment in expect.get("error_contains", []):
            assert fragment in str(info.value)
        return
    outcome = cluster.allocate(pending, node=step.get("node"))
    if expect.get("unsatisfiable"):
        assert outcome.allocated is None, outcome.allocated
        return
    assert outcome.allocated is not None, f"unsatisfiable: {outcome.failures}"
    if "node" in expect:
        assert outcome.allocated.node == expect["node"]
    picks = {
        claim.key: [device_ref(r) for r in alloc["devices"]["results"]]
        for claim, alloc in zip(pending, outcome.allocated.allocations, strict=True)
    }
    wanted = {(k if "/" in k else f"default/{k}"): v for k, v in expect["devices"].items()}
    assert picks == wanted
    for key, allocation in (expect.get("allocation") or {}).items():
        full = key if "/" in key else f"default/{key}"
        got = outcome.allocated.allocations[[c.key for c in pending].index(full)]
        assert got == allocation
    cluster.commit(pending, outcome.allocated)


@pytest.mark.parametrize("caches", ["none", "carried-over"])
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_conformance(case: dict[str, Any], caches: str) -> None:
    classes, slices, claims, nodes = parse_objects(case_objects(case))
    features = Features.parse(case["features"]) if "features" in case else Features()
    if "kube_version" in case:
        features = replace(features, kube_minor=parse_kube_version(case["kube_version"]))
    pool_cache = PoolCache() if caches == "carried-over" else None
    state_cache = StateCache() if caches == "carried-over" else None

    def make(claims: list[ClaimInfo]) -> Cluster:
        return Cluster(
            classes=classes,
            slices=slices,
            claims=claims,
            nodes=[NodeInfo.from_dict(n) for n in nodes],
            engine=CelEngine(),
            features=features,
            pool_cache=pool_cache,
            state_cache=state_cache,
        )

    if pool_cache is not None:
        # An earlier cluster of the same slices and nodes (nothing allocated) gathers every
        # node's pools; the case's cluster then takes them from the cache.
        earlier = make([])
        for name in earlier.node_names():
            earlier.pools_for(earlier.node(name))
    cluster = make(claims)
    by_key = {c.key: c for c in claims}
    steps = case.get("steps") or [
        {k: v for k, v in case.items() if k in ("allocate", "node", "expect")}
    ]
    # The cache's own state, before any step commits (a commit must copy it first).
    cached, before = cluster.state, cluster.state.copy()
    for step in steps:
        _run_step(cluster, by_key, step)
    if state_cache is not None:
        assert (cached.devices, cached.shared_devices, cached.capacity, cached.owners) == (
            before.devices,
            before.shared_devices,
            before.capacity,
            before.owners,
        )


def test_case_names_are_unique() -> None:
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names))
