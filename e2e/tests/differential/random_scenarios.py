"""Seeded random scenarios of the scheduler differential test: the same seed, the same
scenario.
"""

from __future__ import annotations

import random

from differential_objects import Names, Obj, attr, claim, dev, device_class, exactly, resource_slice
from differential_support import Scenario


def random_devices(seed: int) -> Scenario:
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


def random_partitions(seed: int) -> Scenario:
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
