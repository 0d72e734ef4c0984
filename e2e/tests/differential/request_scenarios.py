"""Hand-written scenarios of the scheduler differential test about what a request asks for:
counts, selectors, constraints, prioritized lists, All mode, devices held by other claims,
admin access.
"""

from __future__ import annotations

from differential_objects import Names, Obj, attr, claim, dev, device_class, exactly, resource_slice
from differential_support import Scenario


def plain() -> Scenario:
    """The class narrows to a100s; the request narrows further by index: the first fit is
    neither the first device nor the first a100."""

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


def cel_quantity() -> Scenario:
    """Quantity compareTo on capacity (different suffixes) and semver comparison together."""

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


def match_attribute() -> Scenario:
    """Two slices in one pool. The first pair on NUMA 0 has no NIC on NUMA 0, so the search
    must backtrack to the pair on NUMA 1."""

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


def distinct_attribute() -> Scenario:
    """Three devices of one claim on three different switches (distinctAttribute): the two
    first devices share a switch, so the search must skip one."""

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


def first_available() -> Scenario:
    """Two h100s are wanted first but only one exists; the a100 alternative is taken, and
    configs name the chosen subrequest."""

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


def all_mode() -> Scenario:
    """All healthy devices to one claim; the pod's second claim gets what is left."""

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


def held_by_other_claims() -> Scenario:
    """Three pods in turn: each one's first choice is held by an earlier pod's claim."""

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


def admin_access() -> Scenario:
    """An admin-access claim may take a device another claim holds; a normal one may not."""

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


def all_mode_with_held_devices() -> Scenario:
    """All mode needs every matching device: one held by another claim makes it
    unschedulable, unless the claim has admin access, which takes them all, held or not."""

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
