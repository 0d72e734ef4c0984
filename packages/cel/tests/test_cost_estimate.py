"""The compile-time cost estimate against upstream's numbers.

Every expected value in ``fixtures/upstream_cost.json`` is upstream's ``MaxCost`` (the
file's ``provenance`` says how it was produced); the random differential in
``e2e/tests/differential/test_cel_cost.py`` checks many more.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dra_cel import compile_selector
from dra_cel.cost_estimate import (
    MAX_SELECTOR_COST,
    Environment,
    estimate_cost,
    exceeds_cost_limit,
)
from dra_cel.cost_ranges import U64_MAX, Range, mul_factor

_FIXTURE = Path(__file__).parent / "fixtures" / "upstream_cost.json"
UPSTREAM_MAX_COST: list[tuple[str, int]] = [
    (expression, cost) for expression, cost in json.loads(_FIXTURE.read_text())["cases"]
]


@pytest.mark.parametrize(("expression", "expected"), UPSTREAM_MAX_COST)
def test_worst_case_cost_is_upstreams(expression: str, expected: int) -> None:
    compile_selector(expression)  # the estimate is only defined for what compiles
    assert estimate_cost(expression).hi == expected


def test_limit_is_the_api_servers() -> None:
    nested = (
        "device.attributes.all(d, device.attributes[d].all(k, "
        "device.attributes.all(d2, device.attributes[d2].all(k2, true))))"
    )
    assert exceeds_cost_limit(nested) == 3414275
    assert exceeds_cost_limit("device.driver == 'gpu.nvidia.com'") is None
    assert MAX_SELECTOR_COST == 1_000_000


def test_unbounded_string_list_is_too_complex() -> None:
    # A list literal's strings have no declared size: upstream prices indexOf as unbounded.
    assert exceeds_cost_limit('["a", "b"].indexOf("a") >= 0') == 3689348814741910541


def test_list_type_attributes_environment_prices_the_same_sizes() -> None:
    expression = 'device.attributes["x"].s == "a"'
    assert estimate_cost(expression, Environment(list_type_attributes=True)) == estimate_cost(
        expression
    )


def test_saturating_arithmetic() -> None:
    assert Range(U64_MAX, U64_MAX) + Range(1, 1) == Range(U64_MAX, U64_MAX)
    assert Range(2**40, 2**40).times(Range(2**40, 2**40)).hi == U64_MAX
    assert mul_factor(64, 0.1) == 7
    # In float64, as upstream: 2**64-1 rounds to 2**64 before the factor.
    assert mul_factor(U64_MAX, 0.1) == 1844674407370955264
    assert mul_factor(U64_MAX, 2.0) == U64_MAX
