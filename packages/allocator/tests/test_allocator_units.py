"""Unit tests of the allocator's building blocks: features, quantity formatting, deadline, state."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from allocation_builders import case_objects
from dra_allocator import (
    AllocationError,
    AllocationTimeoutError,
    CelEngine,
    Cluster,
    Features,
    UnknownDeviceClassError,
    parse_objects,
)
from dra_allocator.results import format_quantity


def test_features_parse_listed_gates_on_others_off() -> None:
    feats = Features.parse("DRAPrioritizedList,DRADeviceTaints=true,DRAAdminAccess=false")
    assert feats.prioritized_list
    assert feats.device_taints
    assert not feats.admin_access
    assert not feats.consumable_capacity
    assert Features.parse("all") == Features(list_type_attributes=True)
    assert Features.parse("all,DRAConsumableCapacity=false").consumable_capacity is False
    assert Features.parse("none") == Features.none()
    assert Features().enabled_gates()[0] == "DRAAdminAccess"


def test_features_binding_needs_both_gates() -> None:
    assert not Features.parse("DRADeviceBindingConditions").binding_and_status
    assert Features.parse(
        "DRADeviceBindingConditions,DRAResourceClaimDeviceStatus"
    ).binding_and_status


@pytest.mark.parametrize("spec", ["DRANope", "DRAAdminAccess=maybe"])
def test_features_parse_rejects_unknown(spec: str) -> None:
    with pytest.raises(AllocationError) as info:
        Features.parse(spec)
    assert info.value.field == "--features"


def test_quantity_formatting_is_canonical() -> None:
    assert format_quantity(8 * 2**30, None) == "8Gi"
    assert format_quantity(1536, None) == "1536"
    assert format_quantity(0, None) == "0"
    assert format_quantity(2**30, "1024Mi") == "1Gi"
    assert format_quantity(1000, "1000") == "1k"
    assert format_quantity(Fraction(1, 2), "0.5") == "500m"


def test_deadline_aborts_exponential_search() -> None:
    # 30 partitions of which the shared counters admit only 8, and a claim for 9: every
    # 8-subset is tried before the search gives up (C(30, 8) = 5.8 million).
    devices = [
        {
            "name": f"g{i:02d}",
            "consumesCounters": [{"counterSet": "cs", "counters": {"slots": {"value": "1"}}}],
        }
        for i in range(30)
    ]
    case = {
        "slices": [
            {"name": "d", "node": "n1", "pool": "p", "count": 2, "devices": devices},
            {
                "name": "c",
                "node": "n1",
                "pool": "p",
                "count": 2,
                "sharedCounters": [{"name": "cs", "counters": {"slots": {"value": "8"}}}],
            },
        ],
        "claims": [{"name": "c", "requests": [{"name": "gpu", "count": 9}]}],
    }
    classes, slices, claims, _ = parse_objects(case_objects(case))
    cluster = Cluster(classes=classes, slices=slices, engine=CelEngine(), timeout_s=0.05)
    with pytest.raises(AllocationTimeoutError) as info:
        cluster.allocate(claims, node="n1")
    assert "ResourceClaim default/c" in str(info.value)


def test_commit_holds_devices_and_full_nodes_are_skipped() -> None:
    case = {
        "slices": [
            {"name": f"s{i}", "node": f"n{i}", "devices": [{"name": "g0"}]} for i in range(3)
        ],
        "claims": [{"name": f"c{i}"} for i in range(4)],
    }
    classes, slices, claims, _ = parse_objects(case_objects(case))
    cluster = Cluster(classes=classes, slices=slices, engine=CelEngine())
    placed = []
    for claim in claims[:3]:
        outcome = cluster.allocate([claim])
        assert outcome.allocated is not None
        cluster.commit([claim], outcome.allocated)
        placed.append(outcome.allocated.node)
    assert placed == ["n0", "n1", "n2"]
    assert claims[0].allocation is not None
    last = cluster.allocate([claims[3]])
    assert last.allocated is None
    # Every device held: nothing to look at, so no node is searched.
    assert last.failures == []
    assert cluster.state.owners[("gpu.example.com", "n1", "g0")] == ["default/c1"]


def test_input_errors_raised_even_when_every_node_is_full() -> None:
    case = {
        "slices": [{"name": "s", "node": "n1", "devices": [{"name": "g0"}]}],
        "claims": [
            {
                "name": "holder",
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpu",
                                "driver": "gpu.example.com",
                                "pool": "n1",
                                "device": "g0",
                            }
                        ]
                    }
                },
            },
            {"name": "typo", "requests": [{"name": "gpu", "class": "gpu.example.con"}]},
        ],
    }
    classes, slices, claims, _ = parse_objects(case_objects(case))
    cluster = Cluster(classes=classes, slices=slices, claims=claims, engine=CelEngine())
    with pytest.raises(UnknownDeviceClassError):
        cluster.allocate([claims[1]])


@pytest.mark.parametrize(
    ("spec", "variant"),
    [
        ("DRAPrioritizedList,DRAAdminAccess,DRADeviceTaints,DRAPartitionableDevices", "stable"),
        ("none", "stable"),
        ("DRADeviceBindingConditions", "stable"),
        ("DRADeviceBindingConditions,DRAResourceClaimDeviceStatus", "incubating"),
        ("DRAConsumableCapacity", "incubating"),
        ("DRAAdminAccess,DRAListTypeAttributes", "experimental"),
        ("all", "experimental"),
    ],
)
def test_features_select_upstream_variant(spec: str, variant: str) -> None:
    assert Features.parse(spec).variant == variant
    assert Features().variant == "incubating"


@pytest.mark.parametrize(
    ("spec", "variant"),
    [
        ("none", "stable"),
        ("DRAPrioritizedList,DRAAdminAccess,DRADeviceTaints,DRAPartitionableDevices", "incubating"),
        ("DRAConsumableCapacity", "experimental"),
        ("DRADeviceBindingConditions,DRAResourceClaimDeviceStatus", "experimental"),
        # 1.35 has no DRAListTypeAttributes gate: the scheduler ignores the name.
        ("DRAAdminAccess,DRAListTypeAttributes", "incubating"),
    ],
)
def test_features_select_the_variant_of_1_35(spec: str, variant: str) -> None:
    feats = replace(Features.parse(spec), kube_minor=35)
    assert feats.variant == variant
    assert feats.random_pool_order
    assert feats.counters_by_pool_name
    assert not feats.list_attributes


def test_list_attribute_must_not_be_empty() -> None:
    objects = case_objects(
        {
            "slices": [
                {
                    "name": "s",
                    "node": "n1",
                    "devices": [{"name": "g0", "attributes": {"links": {"ints": []}}}],
                }
            ],
            "claims": [{"name": "c"}],
        }
    )
    with pytest.raises(AllocationError) as info:
        parse_objects(objects)
    assert info.value.field.endswith("links.ints"), info.value.field
    assert "non-empty list" in str(info.value)


def test_stable_variant_pool_order_is_settable() -> None:
    objects = case_objects(
        {
            "slices": [
                {"name": "a", "node": "n1", "pool": "pa", "devices": [{"name": "g0"}]},
                {"name": "b", "node": "n1", "pool": "pb", "devices": [{"name": "g0"}]},
            ],
            "claims": [{"name": "c"}],
        }
    )

    def picked(features: Features, order: list[tuple[str, str]] | None) -> str:
        classes, slices, claims, _ = parse_objects(objects)
        cluster = Cluster(
            classes=classes,
            slices=slices,
            claims=claims,
            engine=CelEngine(),
            features=features,
            pool_order=order,
        )
        outcome = cluster.allocate(claims)
        assert outcome.allocated is not None
        return str(outcome.allocated.allocations[0]["devices"]["results"][0]["pool"])

    stable = Features.parse("DRAPrioritizedList")
    reverse = [("gpu.example.com", "pb"), ("gpu.example.com", "pa")]
    assert picked(stable, None) == "pa"
    assert picked(stable, reverse) == "pb"
    # The incubating variant sorts pools by ID whatever order is asked for.
    assert picked(Features(), reverse) == "pa"
