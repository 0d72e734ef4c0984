"""Property tests: every allocation honours every rule, and allocation is deterministic.

Random clusters (attributes, taints, shared counters, shareable devices with capacity,
devices already held by other claims) and random claims (counts, selectors, constraints,
prioritized lists, tolerations, capacity requests) are allocated; each result is then
checked independently of the allocator's own bookkeeping.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from fractions import Fraction
from typing import Any

from allocation_builders import DRIVER
from case_cluster import case_cluster
from dra_allocator.cel_engine import CelEngine
from dra_allocator.cluster import Cluster
from dra_allocator.features import Features
from dra_allocator.model import ClaimInfo
from dra_api_types import Quantity
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ENGINE = CelEngine()
SELECTORS = [
    'device.attributes["gpu.example.com"].kind == "a"',
    'device.attributes["gpu.example.com"].numa >= 1',
    'device.attributes["gpu.example.com"].kind != "b"'
    ' || device.attributes["gpu.example.com"].numa == 0',
]
CLASSES = [
    {"name": "gpu", "selectors": [f'device.driver == "{DRIVER}"']},
    {"name": "kind-a", "selectors": ['device.attributes["gpu.example.com"].kind == "a"']},
]
TAINTS = [
    [],
    [{"key": "broken", "effect": "NoSchedule"}],
    [{"key": "maintenance", "value": "soon", "effect": "NoExecute"}],
    [{"key": "degraded", "effect": "None"}],
]
TOLERATIONS = [[], [{"key": "broken", "operator": "Exists"}], [{"operator": "Exists"}]]


@st.composite
def devices(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(min_value=1, max_value=7))
    counter_sets = draw(st.integers(min_value=0, max_value=2))
    devs = []
    for i in range(n):
        dev: dict[str, Any] = {
            "name": f"d{i}",
            "attributes": {
                "kind": draw(st.sampled_from(["a", "b"])),
                "numa": draw(st.integers(min_value=0, max_value=2)),
            },
        }
        taints = draw(st.sampled_from(TAINTS))
        if taints:
            dev["taints"] = taints
        if counter_sets and draw(st.booleans()):
            dev["consumesCounters"] = [
                {
                    "counterSet": f"cs{draw(st.integers(min_value=0, max_value=counter_sets - 1))}",
                    "counters": {
                        "mem": {"value": str(draw(st.integers(min_value=1, max_value=4)))}
                    },
                }
            ]
        elif draw(st.integers(min_value=0, max_value=4)) == 0:
            dev["allowMultipleAllocations"] = True
            dev["capacity"] = {"mem": str(draw(st.integers(min_value=2, max_value=8)))}
        devs.append(dev)
    slices = [
        {
            "name": "devices",
            "node": "n1",
            "pool": "p",
            "count": 2 if counter_sets else 1,
            "devices": devs,
        }
    ]
    if counter_sets:
        slices.append(
            {
                "name": "counters",
                "node": "n1",
                "pool": "p",
                "count": 2,
                "sharedCounters": [
                    {
                        "name": f"cs{k}",
                        "counters": {
                            "mem": {"value": str(draw(st.integers(min_value=2, max_value=6)))}
                        },
                    }
                    for k in range(counter_sets)
                ],
            }
        )
    return {"slices": slices, "devices": devs}


@st.composite
def request(draw: st.DrawFn, name: str) -> dict[str, Any]:
    def body() -> dict[str, Any]:
        req: dict[str, Any] = {
            "class": draw(st.sampled_from(["gpu", "gpu", "kind-a"])),
            "count": draw(st.integers(min_value=1, max_value=3)),
        }
        if draw(st.booleans()):
            req["selectors"] = [draw(st.sampled_from(SELECTORS))]
        tolerations = draw(st.sampled_from(TOLERATIONS))
        if tolerations:
            req["tolerations"] = tolerations
        if draw(st.integers(min_value=0, max_value=3)) == 0:
            req["capacity"] = {"requests": {"mem": str(draw(st.integers(1, 4)))}}
        return req

    if draw(st.integers(min_value=0, max_value=3)) == 0:
        return {
            "name": name,
            "firstAvailable": [{"name": f"s{i}", **body()} for i in range(draw(st.integers(1, 3)))],
        }
    return {"name": name, **body()}


@st.composite
def scenario(draw: st.DrawFn) -> dict[str, Any]:
    cluster = draw(devices())
    claims = []
    for c in range(draw(st.integers(min_value=1, max_value=2))):
        reqs = [draw(request(f"r{i}")) for i in range(draw(st.integers(1, 3)))]
        claim: dict[str, Any] = {"name": f"c{c}", "requests": reqs}
        if draw(st.booleans()):
            kind = draw(st.sampled_from(["matchAttribute", "distinctAttribute"]))
            con: dict[str, Any] = {kind: "gpu.example.com/numa"}
            if len(reqs) > 1 and draw(st.booleans()):
                con["requests"] = [reqs[0]["name"]]
            claim["constraints"] = [con]
        claims.append(claim)
    # Some device is already held by another claim.
    held = draw(st.sampled_from([None, *[d["name"] for d in cluster["devices"]]]))
    if held is not None:
        claims.append(
            {
                "name": "holder",
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "r0", "driver": DRIVER, "pool": "p", "device": held}
                        ]
                    }
                },
            }
        )
    return {"classes": CLASSES, "slices": cluster["slices"], "claims": claims}


def allocate(case: dict[str, Any]) -> tuple[list[ClaimInfo], Cluster, list[Any] | None]:
    cluster, claims = case_cluster(case, engine=ENGINE)
    pending = [c for c in claims if c.allocation is None]
    outcome = cluster.allocate(pending, node="n1")
    return pending, cluster, outcome.allocated.allocations if outcome.allocated else None


def check_allocation(
    case: dict[str, Any], pending: list[ClaimInfo], cluster: Cluster, allocations: list[Any]
) -> None:
    devs = {d.name: d for s in cluster.index.slices for d in s.devices}
    held = {dev_id[2] for dev_id in cluster.state.devices}
    exclusive_used: set[str] = set()
    counter_use: dict[str, Fraction] = defaultdict(Fraction)
    capacity_use: dict[str, Fraction] = defaultdict(Fraction)
    touched: set[str] = set()  # counter sets the new allocation draws from
    for name in held:
        for cs, counters in devs[name].consumes_counters:
            for _, value in counters:
                counter_use[cs] += value
    for claim, allocation in zip(pending, allocations, strict=True):
        results = allocation["devices"]["results"]
        by_request: dict[str, list[str]] = defaultdict(list)
        for r in results:
            dev = devs[r["device"]]
            by_request[r["request"]].append(r["device"])
            base, _, sub = r["request"].partition("/")
            req = next(q for q in claim.requests if q.name == base)
            spec = next(s for s in req.first_available if s.name == sub) if sub else req.exact
            assert spec is not None
            cls = cluster.classes[spec.class_name]
            for expr in (*cls.selectors, *spec.selectors):
                assert expr is not None
                assert ENGINE.compile(expr).matches(ENGINE.device(dev)), (expr, dev.name)
            for taint in dev.taints:
                if taint.effect in ("NoSchedule", "NoExecute"):
                    assert any(t.tolerates(taint) for t in spec.tolerations)
            if dev.allow_multiple:
                assert "shareID" in r
                for cname, value in r["consumedCapacity"].items():
                    capacity_use[f"{dev.name}/{cname}"] += Quantity.coerce(value).amount()
            else:
                assert dev.name not in exclusive_used, f"{dev.name} used twice"
                assert dev.name not in held, f"{dev.name} already allocated"
                exclusive_used.add(dev.name)
                for cs, counters in dev.consumes_counters:
                    touched.add(cs)
                    for _, value in counters:
                        counter_use[cs] += value
        # Every request got exactly its count (of the chosen subrequest).
        for req in claim.requests:
            names = [k for k in by_request if k.split("/")[0] == req.name]
            assert len(names) == 1
            sub = names[0].partition("/")[2]
            spec = next(s for s in req.first_available if s.name == sub) if sub else req.exact
            assert spec is not None
            assert len(by_request[names[0]]) == spec.count
        for con in claim.constraints:
            scoped_requests = {
                r["request"]
                for r in results
                if not con.requests
                or r["request"].split("/")[0] in con.requests
                or r["request"] in con.requests
            }
            scoped = [
                n
                for r in results
                if not con.requests
                or r["request"].split("/")[0] in con.requests
                or r["request"] in con.requests
                for n in [r["device"]]
            ]
            values = [devs[n].attributes["gpu.example.com/numa"] for n in scoped]
            if con.match_attribute:
                assert len(set(values)) <= 1
            elif all(len(by_request[r]) == 1 for r in by_request if r in scoped_requests):
                # The kube-scheduler keeps one value per request (see
                # constraints.DistinctAttribute): distinctness holds across single-device
                # requests only, and choices must equal the scheduler's.
                assert len(set(values)) == len(values)
    counter_sets = {
        name: values for s in cluster.index.slices for name, values in s.shared_counters
    }
    for cs in touched:
        used = counter_use[cs]
        assert used <= counter_sets[cs]["mem"], (cs, used)
    for key, used in capacity_use.items():
        name, cname = key.split("/")
        assert used <= devs[name].capacity[cname].value


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_allocations_satisfy_every_rule_and_are_deterministic(case: dict[str, Any]) -> None:
    # The generated input is always valid, so any AllocationError fails the test.
    pending, cluster, allocations = allocate(case)
    again = allocate(case)[2]
    assert again == allocations
    if allocations is not None:
        check_allocation(case, pending, cluster, allocations)


@st.composite
def simple_scenario(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(min_value=1, max_value=6))
    devs = [
        {
            "name": f"d{i}",
            "attributes": {
                "kind": draw(st.sampled_from(["a", "b"])),
                "numa": draw(st.integers(0, 2)),
            },
        }
        for i in range(n)
    ]
    held = draw(st.lists(st.sampled_from([d["name"] for d in devs]), max_size=2, unique=True))
    count = draw(st.integers(min_value=1, max_value=3))
    claim: dict[str, Any] = {"name": "c", "requests": [{"name": "r", "count": count}]}
    if draw(st.booleans()):
        claim["requests"][0]["selectors"] = [draw(st.sampled_from(SELECTORS))]
    # The kube-scheduler checks distinctAttribute per request, only against the request's
    # latest device (see constraints.DistinctAttribute): brute force models it for one device.
    kinds = (
        [None, "matchAttribute", "distinctAttribute"] if count == 1 else [None, "matchAttribute"]
    )
    kind = draw(st.sampled_from(kinds))
    if kind:
        claim["constraints"] = [{kind: "gpu.example.com/numa"}]
    claims = [claim] + [
        {
            "name": f"h{i}",
            "allocation": {
                "devices": {
                    "results": [{"request": "r", "driver": DRIVER, "pool": "p", "device": h}]
                }
            },
        }
        for i, h in enumerate(held)
    ]
    return {
        "classes": CLASSES,
        "claims": claims,
        "slices": [{"name": "s", "node": "n1", "pool": "p", "devices": devs}],
    }


@settings(max_examples=250, deadline=None)
@given(simple_scenario())
def test_allocation_is_complete_and_first_in_order(case: dict[str, Any]) -> None:
    """Brute force: a solution exists iff one is found, and it is the first combination."""
    pending, cluster, allocations = allocate(case)
    claim = pending[0]
    spec = claim.requests[0].exact
    assert spec is not None
    devs = cluster.index.slices[0].devices
    usable = [
        d
        for d in devs
        if d.id not in cluster.state.devices
        and all(ENGINE.compile(e).matches(ENGINE.device(d)) for e in spec.selectors if e)
    ]
    solutions = []
    for combo in itertools.combinations(usable, spec.count):
        values = [d.attributes["gpu.example.com/numa"] for d in combo]
        ok = True
        for con in claim.constraints:
            ok &= len(set(values)) <= 1 if con.match_attribute else len(set(values)) == len(values)
        if ok:
            solutions.append([d.name for d in combo])
    if not solutions:
        assert allocations is None
        return
    assert allocations is not None
    # itertools.combinations yields in lexicographic device order: the first-fit order.
    assert [r["device"] for r in allocations[0]["devices"]["results"]] == solutions[0]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario(), st.sampled_from([34, 35, 36, 37]))
def test_not_searching_a_node_proven_short_changes_no_outcome(
    case: dict[str, Any], kube_minor: int
) -> None:
    """``kubectl dra explain`` skips the search where a request provably lacks devices
    (``skip_hopeless``): the outcome must be the search's, in every release's allocator."""
    outcomes = []
    for skip in (False, True):
        cluster, claims = case_cluster(case, features=Features(kube_minor=kube_minor))
        pending = [c for c in claims if c.allocation is None]
        outcomes.append(cluster.allocate_on(pending, cluster.node("n1"), skip_hopeless=skip))
    assert outcomes[0] == outcomes[1]
