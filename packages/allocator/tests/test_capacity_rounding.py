"""Request-policy rounding of consumable capacity, as upstream's consumable_capacity.go.

Each case was found by the Go-oracle differential test
(e2e/tests/differential/oracle_cases/fractional-*.json, stored-00002.json).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest
from allocation_builders import case_objects
from dra_allocator import CelEngine, Cluster, Features, parse_objects
from dra_allocator import capacity as cap
from dra_allocator.errors import CapacityRequestError
from dra_allocator.model import CapacityInfo, _parse_capacity
from dra_api_types import DeviceCapacity, Quantity

CORES_2 = {"requests": {"cores": "2"}}


def _capacity(policy: dict[str, Any], value: str = "8") -> CapacityInfo:
    return _parse_capacity(DeviceCapacity.from_dict({"value": value, "requestPolicy": policy}))


def _request(text: str) -> tuple[Any, object]:
    return Quantity.parse(text).amount(), text


@pytest.mark.parametrize(
    ("policy", "asked", "fractional", "consumed", "written"),
    [
        # Milli arithmetic: every bound exact in milli units.
        ({"validRange": {"min": "100m", "step": "1"}}, "2", True, Fraction(21, 10), "2100m"),
        ({"validRange": {"min": "0.5", "step": "1.5"}}, "2.6", True, Fraction(7, 2), "3500m"),
        ({"validRange": {"min": "500m", "step": "0.25"}}, "750m", True, Fraction(3, 4), "750m"),
        ({"validRange": {"min": "0.5", "step": "1.5"}}, "2", True, 2, "2"),
        ({"validRange": {"min": "512Mi", "step": "0.25Gi"}}, "700Mi", True, 768 * 2**20, None),
        # Integer arithmetic: the gate off (or 1.36), fractions rounded up by Value().
        ({"validRange": {"min": "100m", "step": "1"}}, "2", False, 2, "2"),
        ({"validRange": {"min": "0.5", "step": "1.5"}}, "2.6", False, 3, "3"),
        # A bound not exact in milli units keeps the integer arithmetic.
        ({"validRange": {"min": "1n", "step": "1"}}, "2.6", True, 3, "3"),
        # validValues: the first value not below the request, compared exactly.
        ({"validValues": ["0.5", "1.5", "2500m"]}, "0.7", True, Fraction(3, 2), "1500m"),
        # Below the minimum: the minimum as written.
        ({"validRange": {"min": "500m", "step": "0.25"}}, "300m", True, Fraction(1, 2), "500m"),
    ],
)
def test_rounding(
    policy: dict[str, Any], asked: str, fractional: bool, consumed: Any, written: object
) -> None:
    value, raw = cap.consumed_value(_request(asked), _capacity(policy), fractional=fractional)
    assert value == consumed
    assert raw == written


def test_request_not_exact_in_milli_is_an_error() -> None:
    policy = {"validRange": {"min": "500m", "step": "0.25"}}
    with pytest.raises(CapacityRequestError):
        cap.consumed_value(_request("1000000001n"), _capacity(policy), fractional=True)
    # Integer arithmetic reads it as 2 (Value() rounds up), min and step as 1.
    assert cap.consumed_value(_request("1000000001n"), _capacity(policy), fractional=False)[0] == 2
    # Below the minimum it is the minimum, before any arithmetic.
    assert cap.consumed_value(_request("1n"), _capacity(policy), fractional=True)[0] == Fraction(
        1, 2
    )


def test_policy_checks_the_rounded_value_on_the_milli_grid() -> None:
    policy = {"validRange": {"min": "500m", "step": "0.25", "max": "2"}}
    capacity = _capacity(policy)
    assert not cap.violates_policy(Fraction(7, 4), capacity, fractional=True)
    assert cap.violates_policy(Fraction(13, 10), capacity, fractional=True)
    assert cap.violates_policy(Fraction(9, 4), capacity, fractional=True)  # above max


def test_default_is_accepted_only_when_go_sees_it_equal() -> None:
    # Go compares the consumption with the default using == on Quantity structs: a copy of
    # "1.5Gi" (kept as inf.Dec) never equals it, the stored form "1536Mi" does.
    # The model keeps quantities as the apiserver stores them, so "1.5Gi" reads as "1536Mi";
    # a default still written "1.5Gi" is what a copy of the unstored object would hold.
    off_grid = {"min": "0.5Gi", "step": "1.5Gi"}
    stored = _capacity({"default": "1.5Gi", "validRange": off_grid}, value="80Gi")
    assert stored.default_raw == "1536Mi"
    raw = replace(stored, default_raw="1.5Gi")
    for capacity, fits in ((raw, False), (stored, True)):
        value, _, ident = cap._consume(None, capacity, fractional=True)
        assert cap.violates_policy(value, capacity, fractional=True, identity=ident) is not fits


def test_milli_value() -> None:
    assert cap.milli_value(Fraction(3, 2)) == 1500
    assert cap.milli_value(Fraction(1, 10**9)) is None


def test_allocation_reports_milli_rounded_consumption() -> None:
    objects = case_objects(
        {
            "slices": [
                {
                    "name": "s1",
                    "node": "n1",
                    "devices": [
                        {
                            "name": "g0",
                            "allowMultipleAllocations": True,
                            "capacity": {
                                "cores": {
                                    "value": "4",
                                    "requestPolicy": {"validRange": {"min": "100m", "step": "1"}},
                                }
                            },
                        }
                    ],
                }
            ],
            "claims": [{"name": "c", "requests": [{"name": "gpu", "capacity": CORES_2}]}],
        }
    )

    def consumed(features: Features) -> object:
        classes, slices, claims, _ = parse_objects(objects)
        cluster = Cluster(
            classes=classes, slices=slices, claims=claims, engine=CelEngine(), features=features
        )
        outcome = cluster.allocate(claims)
        assert outcome.allocated is not None
        return outcome.allocated.allocations[0]["devices"]["results"][0]["consumedCapacity"]

    assert consumed(Features()) == {"cores": "2100m"}
    assert consumed(Features(fractional_capacity_range=False)) == {"cores": "2"}
    assert consumed(Features(kube_minor=36)) == {"cores": "2"}  # 1.36 has no such gate
