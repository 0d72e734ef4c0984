"""``kubectl dra allocate`` against the real kube-scheduler: same objects, same devices.

Each scenario creates a DeviceClass and ResourceSlices for a made-up driver on one node, then
pods with ResourceClaims one after the other; the real scheduler allocates them, and
``kubectl-dra allocate`` gets the same objects (earlier pods' claims as allocated, this pod's
claims as created). The whole allocation must be equal: results (request, driver, pool,
device, admin access, consumed capacity), configs, node selector, and the node.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from differential_support import (
    Names,
    Obj,
    Scenario,
    ScenarioSkipped,
    assert_agrees,
    attr,
    claim,
    dev,
    device_class,
    exactly,
    resource_slice,
    run_scenario,
)
from dra_e2e.handle import ClusterHandle
from plugin_slices import plugin_consumable_shares, plugin_dynamic_mig

pytestmark = pytest.mark.e2e


# ---------------------------------------------------------------- scenarios


def _plain() -> Scenario:
    # The class narrows to a100s; the request narrows further by index: the first fit is
    # neither the first device nor the first a100.
    def classes(n: Names) -> list[Obj]:
        return [
            device_class(n, extra_cel=f'{attr(n, "model")} == "a100"', config={"from": "class"})
        ]

    def slices(n: Names) -> list[Obj]:
        devices = [
            dev("gpu-0", model="t4", index=0),
            dev("gpu-1", model="a100", index=1),
            dev("gpu-2", model="a100", index=2),
            dev("gpu-3", model="t4", index=3),
            dev("gpu-4", model="a100", index=4),
        ]
        return [resource_slice(n, "s", devices=devices)]

    def pods(n: Names) -> list[list[Obj]]:
        requests = [
            exactly(n, "first"),
            exactly(n, "late", selectors=(f"{attr(n, 'index')} >= 2",)),
        ]
        config = [{"requests": ["late"], "opaque": {"driver": n.driver, "parameters": {"x": 1}}}]
        return [[claim(n, "plain", requests, config=config)]]

    return Scenario("plain", classes, slices, pods)


def _cel_quantity() -> Scenario:
    # Quantity compareTo on capacity (different suffixes) and semver comparison together.
    def slices(n: Names) -> list[Obj]:
        devices = [
            dev("gpu-0", memory="16Gi", driverVersion="v2.0.0"),
            dev("gpu-1", memory="80Gi", driverVersion="v1.4.9"),
            dev("gpu-2", memory="40960Mi", driverVersion="v2.1.0"),
            dev("gpu-3", memory="85899345920", driverVersion="v1.10.0"),
            dev("gpu-4", memory="141Gi", driverVersion="v3.0.0"),
        ]
        return [resource_slice(n, "s", devices=devices)]

    def pods(n: Names) -> list[list[Obj]]:
        selector = (
            f'device.capacity["{n.driver}"].memory.compareTo(quantity("40Gi")) > 0 && '
            f'{attr(n, "driverVersion")}.isGreaterThan(semver("1.5.0"))'
        )
        return [[claim(n, "big", [exactly(n, "gpus", selectors=(selector,), count=2)])]]

    return Scenario("cel-quantity", lambda n: [device_class(n)], slices, pods)


def _match_attribute() -> Scenario:
    # Two slices in one pool. The first pair on NUMA 0 has no NIC on NUMA 0, so the search
    # must backtrack to the pair on NUMA 1.
    def slices(n: Names) -> list[Obj]:
        first = [
            dev("gpu-0", kind="gpu", numa=0),
            dev("gpu-1", kind="gpu", numa=1),
            dev("nic-0", kind="nic", numa=2),
        ]
        second = [
            dev("gpu-2", kind="gpu", numa=1),
            dev("gpu-3", kind="gpu", numa=0),
            dev("nic-1", kind="nic", numa=1),
        ]
        return [
            resource_slice(n, "a", devices=first, slice_count=2),
            resource_slice(n, "b", devices=second, slice_count=2),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        requests = [
            exactly(n, "gpus", selectors=(f'{attr(n, "kind")} == "gpu"',), count=2),
            exactly(n, "nic", selectors=(f'{attr(n, "kind")} == "nic"',)),
        ]
        constraints = [{"matchAttribute": f"{n.driver}/numa"}]
        return [[claim(n, "numa", requests, constraints=constraints)]]

    return Scenario("match-attribute", lambda n: [device_class(n)], slices, pods)


def _distinct_attribute() -> Scenario:
    def slices(n: Names) -> list[Obj]:
        devices = [
            dev("gpu-0", switch="sw0"),
            dev("gpu-1", switch="sw0"),
            dev("gpu-2", switch="sw1"),
            dev("gpu-3", switch="sw1"),
            dev("gpu-4", switch="sw2"),
        ]
        return [resource_slice(n, "s", devices=devices)]

    def pods(n: Names) -> list[list[Obj]]:
        requests = [exactly(n, "a", count=2), exactly(n, "b")]
        constraints = [{"distinctAttribute": f"{n.driver}/switch"}]
        return [[claim(n, "spread", requests, constraints=constraints)]]

    return Scenario(
        "distinct-attribute",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("claims:0.spec.devices.constraints.0.distinctAttribute",),
    )


def _first_available() -> Scenario:
    # Two h100s are wanted first but only one exists; the a100 alternative is taken, and
    # configs name the chosen subrequest.
    def classes(n: Names) -> list[Obj]:
        return [device_class(n, config={"from": "class"})]

    def slices(n: Names) -> list[Obj]:
        devices = [
            dev("gpu-0", model="a100"),
            dev("gpu-1", model="h100"),
            dev("gpu-2", model="a100"),
        ]
        return [resource_slice(n, "s", devices=devices)]

    def pods(n: Names) -> list[list[Obj]]:
        model = attr(n, "model")
        gpu = {
            "name": "gpu",
            "firstAvailable": [
                {
                    "name": "two-h100",
                    "deviceClassName": n.driver,
                    "count": 2,
                    "selectors": [{"cel": {"expression": f'{model} == "h100"'}}],
                },
                {
                    "name": "one-a100",
                    "deviceClassName": n.driver,
                    "selectors": [{"cel": {"expression": f'{model} == "a100"'}}],
                },
            ],
        }
        config = [
            {"requests": ["gpu/one-a100"], "opaque": {"driver": n.driver, "parameters": {"s": 1}}},
            {"requests": ["gpu/two-h100"], "opaque": {"driver": n.driver, "parameters": {"s": 2}}},
            {"opaque": {"driver": n.driver, "parameters": {"all": True}}},
        ]
        return [[claim(n, "prio", [gpu, exactly(n, "any")], config=config)]]

    return Scenario("first-available", classes, slices, pods)


def _all_mode() -> Scenario:
    # All healthy devices to one claim; the pod's second claim gets what is left.
    def slices(n: Names) -> list[Obj]:
        devices = [
            dev("gpu-0", healthy=True),
            dev("gpu-1", healthy=False),
            dev("gpu-2", healthy=True),
            dev("gpu-3", healthy=True),
        ]
        return [resource_slice(n, "s", devices=devices)]

    def pods(n: Names) -> list[list[Obj]]:
        everything = exactly(n, "all", selectors=(attr(n, "healthy"),), allocationMode="All")
        return [[claim(n, "all-healthy", [everything]), claim(n, "rest", [exactly(n, "one")])]]

    return Scenario("all-mode", lambda n: [device_class(n)], slices, pods)


def _held_by_other_claims() -> Scenario:
    # Three pods in turn: each one's first choice is held by an earlier pod's claim.
    def slices(n: Names) -> list[Obj]:
        devices = [dev(f"gpu-{i}", rack="r1" if i in (0, 3) else "r2") for i in range(5)]
        return [resource_slice(n, "s", devices=devices)]

    def pods(n: Names) -> list[list[Obj]]:
        rack = attr(n, "rack")
        return [
            [claim(n, "first", [exactly(n, "gpu")])],
            [claim(n, "second", [exactly(n, "gpus", count=2)])],
            [claim(n, "third", [exactly(n, "gpu", selectors=(f'{rack} == "r1"',))])],
            # Both r1 devices are held now: unschedulable for both.
            [claim(n, "fourth", [exactly(n, "gpu", selectors=(f'{rack} == "r1"',))])],
        ]

    return Scenario("held", lambda n: [device_class(n)], slices, pods, refused={3: "Unschedulable"})


def _admin_access() -> Scenario:
    # An admin-access claim may take a device another claim holds; a normal one may not.
    def slices(n: Names) -> list[Obj]:
        return [resource_slice(n, "s", devices=[dev(f"gpu-{i}") for i in range(3)])]

    def pods(n: Names) -> list[list[Obj]]:
        return [
            [claim(n, "user", [exactly(n, "gpus", count=2)])],
            [claim(n, "monitor", [exactly(n, "gpu", adminAccess=True)])],
            [claim(n, "late", [exactly(n, "gpu")])],
        ]

    return Scenario(
        "admin-access",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("claims:1.spec.devices.requests.0.exactly.adminAccess",),
        admin_namespace=True,
    )


def _partitionable() -> Scenario:
    # Counters in their own slice (the 1.35+ layout). Half of gpu-0 taken by one claim blocks
    # the full gpu-0 for the pod's other claim, which gets gpu-1; a later half fits in gpu-0.
    def slices(n: Names) -> list[Obj]:
        counters = [
            {"name": f"gpu-{g}-mem", "counters": {"memory": {"value": "40Gi"}}} for g in (0, 1)
        ]
        devices: list[Obj] = []
        for g in (0, 1):
            whole = dev(f"gpu-{g}", kind="full")
            whole["consumesCounters"] = [
                {"counterSet": f"gpu-{g}-mem", "counters": {"memory": {"value": "40Gi"}}}
            ]
            devices.append(whole)
            for h in (0, 1):
                half = dev(f"gpu-{g}-half-{h}", kind="half")
                half["consumesCounters"] = [
                    {"counterSet": f"gpu-{g}-mem", "counters": {"memory": {"value": "20Gi"}}}
                ]
                devices.append(half)
        return [
            resource_slice(n, "counters", shared_counters=counters, slice_count=2),
            resource_slice(n, "devices", devices=devices, slice_count=2),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        kind = attr(n, "kind")
        half = exactly(n, "half", selectors=(f'{kind} == "half"',))
        full = exactly(n, "full", selectors=(f'{kind} == "full"',))
        return [
            [claim(n, "half", [half]), claim(n, "full", [full])],
            [claim(n, "another-half", [half])],
        ]

    return Scenario(
        "partitionable",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.sharedCounters", "slices:1.spec.devices.0.consumesCounters"),
    )


def _node_selector() -> Scenario:
    # A pool that names its node by label selector, not nodeName: the allocation carries
    # the slice's selector, and only the node with that hostname label fits.
    def slices(n: Names) -> list[Obj]:
        selector = {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [n.node]}
                    ]
                }
            ]
        }
        devices = [dev("gpu-0"), dev("gpu-1")]
        return [resource_slice(n, "s", devices=devices, node_selection={"nodeSelector": selector})]

    def pods(n: Names) -> list[list[Obj]]:
        return [[claim(n, "by-label", [exactly(n, "gpu")])]]

    return Scenario("node-selector", lambda n: [device_class(n)], slices, pods)


def _pools() -> Scenario:
    # Pool rules together: of the node's pool only the newest generation counts; an
    # incomplete pool (one of two slices published) is skipped although it sorts first; a
    # network-attached pool (allNodes) sorts before the node's and serves the first request.
    def slices(n: Names) -> list[Obj]:
        return [
            resource_slice(n, "old", devices=[dev("old-0"), dev("old-1")], generation=1),
            resource_slice(n, "new", devices=[dev("new-0"), dev("new-1")], generation=2),
            resource_slice(
                n, "partial", devices=[dev("partial-0")], pool="a-incomplete", slice_count=2
            ),
            resource_slice(
                n,
                "fabric",
                devices=[dev("fabric-0", kind="nic")],
                pool="b-fabric",
                node_selection={"allNodes": True},
            ),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        local = f'!has(device.attributes["{n.driver}"].kind)'
        nic = f'has(device.attributes["{n.driver}"].kind)'
        return [
            [claim(n, "mixed", [exactly(n, "any"), exactly(n, "local", selectors=(local,))])],
            [claim(n, "fabric-only", [exactly(n, "nic", selectors=(nic,))])],
        ]

    return Scenario(
        "pools", lambda n: [device_class(n)], slices, pods, refused={1: "Unschedulable"}
    )


def _per_device_node_selection() -> Scenario:
    # One slice whose devices each name their node selection: one on this node, one on
    # every node, one on a node that does not exist.
    def slices(n: Names) -> list[Obj]:
        elsewhere = dev("elsewhere")
        elsewhere["nodeName"] = f"{n.node}-absent"
        here = dev("here")
        here["nodeName"] = n.node
        everywhere = dev("everywhere")
        everywhere["allNodes"] = True
        return [
            resource_slice(
                n,
                "s",
                devices=[elsewhere, everywhere, here],
                pool="per-device",
                node_selection={"perDeviceNodeSelection": True},
            )
        ]

    def pods(n: Names) -> list[list[Obj]]:
        return [[claim(n, "two", [exactly(n, "gpus", count=2)])]]

    return Scenario(
        "per-device-nodes",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.perDeviceNodeSelection",),
    )


def _taint_rules() -> Scenario:
    # DeviceTaintRules taint devices without touching their slices: a NoSchedule rule on
    # gpu-0 (by driver, pool and device) and an effect-None rule on gpu-1. The claim without
    # a toleration takes gpu-1; the next pod's tolerating claim takes gpu-0.
    def slices(n: Names) -> list[Obj]:
        return [resource_slice(n, "s", devices=[dev(f"gpu-{i}") for i in range(3)])]

    def rules(n: Names) -> list[Obj]:
        def rule(suffix: str, selector: Obj, effect: str) -> Obj:
            return {
                "apiVersion": "resource.k8s.io/v1beta2",
                "kind": "DeviceTaintRule",
                "metadata": {"name": n.slice_name(suffix)},
                "spec": {
                    "deviceSelector": selector,
                    "taint": {"key": "example.com/maintenance", "value": "x", "effect": effect},
                },
            }

        return [
            rule("block", {"driver": n.driver, "pool": n.node, "device": "gpu-0"}, "NoSchedule"),
            rule("note", {"driver": n.driver, "device": "gpu-1"}, "None"),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        toleration = {"key": "example.com/maintenance", "operator": "Exists"}
        return [
            [claim(n, "plain", [exactly(n, "gpu")])],
            [claim(n, "tolerant", [exactly(n, "gpu", tolerations=[toleration])])],
        ]

    return Scenario("taint-rules", lambda n: [device_class(n)], slices, pods, extra=rules)


def _cel_runtime_error() -> Scenario:
    # The selector reads an attribute gpu-0 lacks: a CEL runtime error aborts the attempt
    # (the scheduler reports an error, kubectl-dra exits 2), it is not "no match". The class
    # selector is fine, so a later claim with a guarded selector still allocates.
    def slices(n: Names) -> list[Obj]:
        return [resource_slice(n, "s", devices=[dev("gpu-0"), dev("gpu-1", model="a100")])]

    def pods(n: Names) -> list[list[Obj]]:
        model = attr(n, "model")
        guarded = f'has({model}) && {model} == "a100"'
        return [
            [claim(n, "unguarded", [exactly(n, "gpu", selectors=(f'{model} == "a100"',))])],
            [claim(n, "guarded", [exactly(n, "gpu", selectors=(guarded,))])],
        ]

    return Scenario(
        "cel-error", lambda n: [device_class(n)], slices, pods, refused={0: "SchedulerError"}
    )


def _binding_conditions() -> Scenario:
    # Devices that need binding conditions: the scheduler allocates them (the results carry
    # the conditions) and then waits for a driver that never comes, so the pod stays
    # unbound. A network-attached device (allNodes) that binds to its node makes the
    # allocation node-specific.
    def slices(n: Names) -> list[Obj]:
        def attached(name: str) -> Obj:
            out = dev(name)
            out["bindingConditions"] = ["attached"]
            out["bindingFailureConditions"] = ["failed"]
            out["bindsToNode"] = True
            return out

        return [
            resource_slice(
                n,
                "fabric",
                devices=[attached("fabric-0")],
                pool="a-fabric",
                node_selection={"allNodes": True},
            ),
            resource_slice(n, "local", devices=[attached("gpu-0"), dev("gpu-1")]),
        ]

    def pods(n: Names) -> list[list[Obj]]:
        return [
            [claim(n, "fabric", [exactly(n, "any")])],
            [claim(n, "two", [exactly(n, "gpus", count=2)])],
        ]

    return Scenario(
        "binding-conditions",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.devices.0.bindingConditions",),
    )


def _taints() -> Scenario:
    # A NoSchedule taint keeps gpu-0 from the claim without a toleration; the tolerating
    # claim of the same pod takes it.
    def slices(n: Names) -> list[Obj]:
        tainted = dev("gpu-0")
        tainted["taints"] = [
            {"key": "example.com/degraded", "value": "ecc", "effect": "NoSchedule"}
        ]
        return [resource_slice(n, "s", devices=[tainted, dev("gpu-1"), dev("gpu-2")])]

    def pods(n: Names) -> list[list[Obj]]:
        toleration = {"key": "example.com/degraded", "operator": "Exists", "effect": "NoSchedule"}
        return [
            [
                claim(n, "strict", [exactly(n, "gpu")]),
                claim(n, "tolerant", [exactly(n, "gpu", tolerations=[toleration])]),
            ]
        ]

    return Scenario(
        "taints",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.devices.0.taints",),
    )


def _consumable_capacity() -> Scenario:
    # One shareable device; requests are rounded up to the policy's step and share it.
    def slices(n: Names) -> list[Obj]:
        shared = dev("gpu-0")
        shared["allowMultipleAllocations"] = True
        shared["capacity"] = {
            "memory": {
                "value": "80Gi",
                "requestPolicy": {
                    "default": "10Gi",
                    "validRange": {"min": "10Gi", "step": "10Gi"},
                },
            }
        }
        return [resource_slice(n, "s", devices=[shared, dev("gpu-1")])]

    def pods(n: Names) -> list[list[Obj]]:
        memory = {"requests": {"memory": "25Gi"}}
        return [
            [
                claim(n, "rounded", [exactly(n, "gpu", capacity=memory)]),
                claim(n, "default", [exactly(n, "gpu")]),
            ],
            [claim(n, "rest", [exactly(n, "gpu", capacity={"requests": {"memory": "40Gi"}})])],
            # gpu-0 is full and gpu-1 has no memory capacity to consume.
            [claim(n, "more", [exactly(n, "gpu", capacity={"requests": {"memory": "10Gi"}})])],
        ]

    return Scenario(
        "consumable",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.devices.0.allowMultipleAllocations",),
        refused={2: "Unschedulable"},
    )


def _random(seed: int) -> Scenario:
    """A seeded mix on twelve devices: five pods in turn, each with one or two claims of one or
    two requests (counts, selectors, prioritized lists, constraints); later pods find devices
    held, and some find none (whichever the scheduler says, kubectl-dra must agree)."""
    rng = random.Random(seed)
    devices = [
        (f"gpu-{i}", rng.choice(["a100", "h100"]), rng.randint(0, 1), rng.choice(["40Gi", "80Gi"]))
        for i in range(12)
    ]
    selectors = [
        'model == "a100"',
        'model == "h100"',
        "numa == 1",
        'memory.compareTo(quantity("64Gi")) >= 0',
    ]
    pod_specs: list[list[list[tuple[str, int, list[str]]]]] = []
    constraints: dict[tuple[int, int], str] = {}
    for p in range(5):
        claims = []
        for c in range(rng.randint(1, 2)):
            requests = []
            for _ in range(rng.randint(1, 2)):
                kind = rng.choice(["exact", "exact", "first"])
                picked = [rng.choice(selectors)] if rng.random() < 0.6 else []
                requests.append((kind, rng.choice([1, 1, 2]), picked))
            claims.append(requests)
            if len(requests) > 1 or requests[0][1] > 1:
                roll = rng.random()
                if roll < 0.3:
                    constraints[(p, c)] = "matchAttribute"
                elif roll < 0.5:
                    constraints[(p, c)] = "distinctAttribute"
        pod_specs.append(claims)

    def cel(n: Names, expr: str) -> str:
        if expr.startswith("memory"):
            return f'device.capacity["{n.driver}"].{expr}'
        return f'device.attributes["{n.driver}"].{expr}'

    def slices(n: Names) -> list[Obj]:
        devs = [dev(name, memory=mem, model=model, numa=numa) for name, model, numa, mem in devices]
        return [resource_slice(n, "s", devices=devs)]

    def pods(n: Names) -> list[list[Obj]]:
        out: list[list[Obj]] = []
        for p, claims in enumerate(pod_specs):
            objs = []
            for c, requests in enumerate(claims):
                reqs: list[Obj] = []
                for r, (kind, count, sel) in enumerate(requests):
                    exprs = tuple(cel(n, e) for e in sel)
                    if kind == "exact":
                        reqs.append(exactly(n, f"r{r}", selectors=exprs, count=count))
                        continue
                    first = exactly(n, "first", selectors=exprs, count=count)["exactly"]
                    reqs.append(
                        {
                            "name": f"r{r}",
                            "firstAvailable": [
                                {"name": "first", **first},
                                {"name": "fallback", "deviceClassName": n.driver},
                            ],
                        }
                    )
                extra: Obj = {}
                if (p, c) in constraints:
                    extra["constraints"] = [{constraints[(p, c)]: f"{n.driver}/numa"}]
                objs.append(claim(n, f"p{p}-c{c}", reqs, **extra))
            out.append(objs)
        return out

    return Scenario(f"random-{seed}", lambda n: [device_class(n)], slices, pods, refused=None)


def _random_partitions(seed: int) -> Scenario:
    """A seeded mix on partitionable GPUs (six, each whole or as two halves sharing its
    counters), some halves tainted: requests with counts, selectors, tolerations,
    prioritized lists, All mode and request-scoped constraints, five pods in turn."""
    rng = random.Random(seed)
    models = {g: rng.choice(["a100", "h100"]) for g in range(6)}
    halves = [f"gpu-{g}-half-{h}" for g in range(6) for h in (0, 1)]
    tainted = {name for name in halves if rng.random() < 0.25}
    selectors = ['kind == "half"', 'kind == "full"', "numa == 0", 'model == "a100"']
    toleration = {"key": "example.com/ecc", "operator": "Exists"}
    plan: list[list[Obj]] = []
    for _ in range(5):
        claims = []
        for _ in range(rng.randint(1, 2)):
            requests = []
            for r in range(rng.randint(1, 2)):
                requests.append(
                    {
                        "name": f"r{r}",
                        "prioritized": rng.random() < 0.25,
                        "all": rng.random() < 0.05,
                        "count": rng.choice([1, 1, 2]),
                        "selector": rng.choice(selectors) if rng.random() < 0.7 else None,
                        "tolerate": rng.random() < 0.3,
                    }
                )
            constraint = None
            if rng.random() < 0.4:
                constraint = {
                    "kind": rng.choice(["matchAttribute", "distinctAttribute"]),
                    "scoped": len(requests) > 1 and rng.random() < 0.5,
                }
            claims.append({"requests": requests, "constraint": constraint})
        plan.append(claims)

    def slices(n: Names) -> list[Obj]:
        counters = [
            {"name": f"gpu-{g}-mem", "counters": {"memory": {"value": "40Gi"}}} for g in range(6)
        ]
        out = [resource_slice(n, "counters", shared_counters=counters, slice_count=3)]
        for part, gpus in (("devices-a", (0, 1, 2)), ("devices-b", (3, 4, 5))):
            devices = []
            for g in gpus:
                for name, kind, amount in (
                    (f"gpu-{g}", "full", "40Gi"),
                    (f"gpu-{g}-half-0", "half", "20Gi"),
                    (f"gpu-{g}-half-1", "half", "20Gi"),
                ):
                    device = dev(name, kind=kind, numa=g % 2, model=models[g])
                    device["consumesCounters"] = [
                        {"counterSet": f"gpu-{g}-mem", "counters": {"memory": {"value": amount}}}
                    ]
                    if name in tainted:
                        device["taints"] = [
                            {"key": "example.com/ecc", "value": "1", "effect": "NoSchedule"}
                        ]
                    devices.append(device)
            out.append(resource_slice(n, part, devices=devices, slice_count=3))
        return out

    def request(n: Names, spec: Obj) -> Obj:
        body: Obj = {"deviceClassName": n.driver}
        if spec["selector"]:
            body["selectors"] = [{"cel": {"expression": f"{attr(n, spec['selector'])}"}}]
        if spec["all"] and spec["selector"]:
            body["allocationMode"] = "All"
        else:
            body["count"] = spec["count"]
        if spec["tolerate"]:
            body["tolerations"] = [toleration]
        if spec["prioritized"]:
            fallback: Obj = {"name": "fallback", "deviceClassName": n.driver}
            if spec["tolerate"]:
                fallback["tolerations"] = [toleration]
            return {"name": spec["name"], "firstAvailable": [{"name": "first", **body}, fallback]}
        return {"name": spec["name"], "exactly": body}

    def pods(n: Names) -> list[list[Obj]]:
        out: list[list[Obj]] = []
        for p, claims in enumerate(plan):
            objs = []
            for c, spec in enumerate(claims):
                extra: Obj = {}
                con = spec["constraint"]
                if con is not None:
                    entry: Obj = {con["kind"]: f"{n.driver}/numa"}
                    if con["scoped"]:
                        entry["requests"] = ["r0"]
                    extra["constraints"] = [entry]
                reqs = [request(n, r) for r in spec["requests"]]
                objs.append(claim(n, f"p{p}-c{c}", reqs, **extra))
            out.append(objs)
        return out

    return Scenario(
        f"random-partitions-{seed}",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.sharedCounters", "slices:1.spec.devices.0.consumesCounters"),
        refused=None,
    )


def _consumable_policies() -> Scenario:
    # Request policies and quantity formats: decimal units rounded up to a step, a set of
    # valid values, and a capacity without a policy (a claim that names no amount takes all).
    def slices(n: Names) -> list[Obj]:
        stepped = dev("stepped", slot=0)
        stepped["allowMultipleAllocations"] = True
        stepped["capacity"] = {
            "bandwidth": {
                "value": "100G",
                "requestPolicy": {
                    "default": "1500M",
                    "validRange": {"min": "1500M", "max": "60G", "step": "1500M"},
                },
            }
        }
        valued = dev("valued", slot=1)
        valued["allowMultipleAllocations"] = True
        valued["capacity"] = {
            "memory": {
                "value": "32Gi",
                "requestPolicy": {"default": "1Gi", "validValues": ["1Gi", "4Gi", "16Gi"]},
            }
        }
        plain = dev("plain", slot=2)
        plain["allowMultipleAllocations"] = True
        plain["capacity"] = {"memory": {"value": "8Gi"}}
        return [resource_slice(n, "s", devices=[stepped, valued, plain])]

    def pods(n: Names) -> list[list[Obj]]:
        slots = {"stepped": 0, "valued": 1, "plain": 2}

        def on(device: str, **capacity: str) -> list[Obj]:
            selector = f'device.attributes["{n.driver}"].slot == {slots[device]}'
            body: Obj = {}
            if capacity:
                body["capacity"] = {"requests": capacity}
            return [exactly(n, "r", selectors=(selector,), **body)]

        return [
            [
                claim(n, "two-g", on("stepped", bandwidth="2G")),
                claim(n, "default-bw", on("stepped")),
                claim(n, "two-gi", on("valued", memory="2Gi")),
                claim(n, "default-mem", on("valued")),
            ],
            [
                claim(n, "all-of-plain", on("plain")),
                claim(n, "big-bw", on("stepped", bandwidth="40G")),
            ],
            [claim(n, "more-plain", on("plain", memory="1Gi"))],
        ]

    return Scenario(
        "consumable-policies",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("slices:0.spec.devices.0.allowMultipleAllocations",),
        refused={2: "Unschedulable"},
    )


def _all_mode_with_held_devices() -> Scenario:
    # All mode needs every matching device: one held by another claim makes it unschedulable,
    # unless the claim has admin access, which takes them all, held or not.
    def slices(n: Names) -> list[Obj]:
        return [resource_slice(n, "s", devices=[dev(f"gpu-{i}") for i in range(3)])]

    def pods(n: Names) -> list[list[Obj]]:
        return [
            [claim(n, "one", [exactly(n, "gpu")])],
            [claim(n, "everything", [exactly(n, "all", allocationMode="All")])],
            [claim(n, "audit", [exactly(n, "all", allocationMode="All", adminAccess=True)])],
        ]

    return Scenario(
        "all-held",
        lambda n: [device_class(n)],
        slices,
        pods,
        requires=("claims:2.spec.devices.requests.0.exactly.adminAccess",),
        admin_namespace=True,
        refused={1: "Unschedulable"},
    )


SCENARIOS = [
    _plain(),
    _cel_quantity(),
    _match_attribute(),
    _distinct_attribute(),
    _first_available(),
    _all_mode(),
    _held_by_other_claims(),
    _admin_access(),
    _all_mode_with_held_devices(),
    _partitionable(),
    _node_selector(),
    _pools(),
    _per_device_node_selection(),
    _cel_runtime_error(),
    _binding_conditions(),
    _taints(),
    _taint_rules(),
    _consumable_capacity(),
    _consumable_policies(),
    plugin_dynamic_mig(),
    plugin_consumable_shares(),
    *(_random(seed) for seed in (1, 2, 3)),
    *(_random_partitions(seed) for seed in (1, 2, 3)),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_kubectl_dra_allocates_like_the_scheduler(
    scenario: Scenario, e2e_cluster: ClusterHandle, e2e_namespace: str, tmp_path: Path
) -> None:
    try:
        outcomes = run_scenario(e2e_cluster, scenario, namespace=e2e_namespace, workdir=tmp_path)
    except ScenarioSkipped as exc:
        pytest.skip(f"{scenario.name}: {exc}")
    assert outcomes, "the scenario ran no pod"
    if scenario.refused is not None:
        # The scenario is meant to exercise these outcomes: the scheduler must agree.
        refused = {i: o.refused for i, o in enumerate(outcomes) if o.refused is not None}
        assert refused == scenario.refused, f"pods the scheduler refused: {refused}"
    assert_agrees(outcomes)
