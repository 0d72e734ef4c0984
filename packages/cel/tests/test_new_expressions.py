"""The gated declarations of the API server's new-expressions environment.

Verdicts as ``k8s.io/dynamic-resource-allocation/cel`` v0.37.2 gives them for
``environment.NewExpressions`` under each combination of DRAConsumableCapacity and
DRAListTypeAttributes (checked with ``dra-go-allocate -cel-cost``).
"""

from __future__ import annotations

import pytest
from dra_cel import compile_selector
from dra_cel.environment import Environment
from dra_cel.new_expressions import new_expression_error

COMBINATIONS = [
    Environment(consumable_capacity=cc, list_type_attributes=lt)
    for cc in (False, True)
    for lt in (False, True)
]

# expression -> the gate it needs: "cc" (DRAConsumableCapacity), "lt"
# (DRAListTypeAttributes) or "" (compiles under every combination).
NEEDS: list[tuple[str, str]] = [
    ("device.allowMultipleAllocations", "cc"),
    ("has(device.allowMultipleAllocations)", "cc"),
    ('device.allowMultipleAllocations == true || device.driver == "a"', "cc"),
    ('device.attributes["x"].l.includes("a")', "lt"),
    ("[1, 2].includes(1)", "lt"),
    ('device.attributes["x"].l.all(v, v == "a")', "lt"),
    ('device.attributes["x"]["l"].exists(v, true)', "lt"),
    ('cel.bind(a, device.attributes["x"], a.l.map(v, v).size() > 0)', "lt"),
    (
        "device.attributes.all(d, device.attributes[d].all(k, "
        "device.attributes[d][k].all(v, true)))",
        "lt",
    ),
    ("device.attributes.all(d, m, m.all(k, v, v.all(x, true)))", "lt"),
    ('device.attributes["x"].l.filter(v, v > 1).size() > 0', "lt"),
    ('device.attributes["x"].l.sortBy(v, v).size() > 0', "lt"),
    ('device.attributes["x"].l.transformList(i, v, v).size() > 0', "lt"),
    ('device.attributes["x"].l.exists_one(v, v == 1)', "lt"),
    ("device.attributes.all(d, m, m.all(k, true))", ""),
    ('device.attributes["x"].all(k, true)', ""),
    ('dyn(device.attributes["x"].l).all(v, true)', ""),
    ('device.attributes["x"].l.size() > 1', ""),
    ('"a" in device.attributes["x"].l', ""),
]


@pytest.mark.parametrize("env", COMBINATIONS, ids=lambda e: f"cc={e.consumable_capacity}")
@pytest.mark.parametrize(("expression", "needs"), NEEDS)
def test_gated_declarations(env: Environment, expression: str, needs: str) -> None:
    compile_selector(expression)  # stored expressions see everything
    enabled = {"cc": env.consumable_capacity, "lt": env.list_type_attributes, "": True}[needs]
    error = new_expression_error(expression, env)
    assert (error is None) == enabled, (env, error)


def test_errors_are_worded_and_placed_as_upstream() -> None:
    off = Environment(consumable_capacity=False, list_type_attributes=False)
    err = new_expression_error("device.driver == 'a' || device.allowMultipleAllocations", off)
    assert err is not None
    assert err.message == "undefined field 'allowMultipleAllocations'"
    assert err.column == 31
    err = new_expression_error('device.attributes["x"].l.all(v, true)', off)
    assert err is not None
    assert err.message == (
        "expression of type 'any' cannot be range of a comprehension "
        "(must be list, map, or dynamic)"
    )
    err = new_expression_error('["a"].includes("a")', off)
    assert err is not None
    assert err.message == "undeclared reference to 'includes' (in container '')"
