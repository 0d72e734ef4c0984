"""The CEL cost estimate of ``kubectl dra validate`` against upstream's, on random selectors.

``dra-go-allocate -cel-cost`` (``dra_e2e.go_allocator.run_cel_costs``) compiles each selector
with ``k8s.io/dynamic-resource-allocation/cel`` at the harness's Kubernetes version, as the
API server does for a new DeviceClass or ResourceClaim, and prints ``MaxCost``. For every
seeded random selector (``random_cel``) both sides must agree on whether it compiles and, when
it does (in the new-expressions environment of the case's gates), on the exact worst-case
cost, hence on the API server's verdict against the limit.

``DRA_CEL_CASES`` sets the number of selectors (default 1000; 10000 on demand),
``DRA_CEL_SEED`` the first seed. Disagreements are printed with their seed and belong in
``packages/cel/tests/fixtures/upstream_cost.json`` before they are fixed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from dra_cel import CelCompileError, compile_selector
from dra_cel.cost_estimate import MAX_SELECTOR_COST, estimate_cost
from dra_cel.environment import Environment
from dra_cel.new_expressions import new_expression_error
from dra_e2e.go_allocator import CelCostCase, ensure_go_allocator, run_cel_costs
from kubectl_dra.validation import check_selector
from random_cel import random_selector, type_error_expressions

pytestmark = pytest.mark.slow


def _case(seed: int) -> CelCostCase:
    # Every fourth selector without DRAConsumableCapacity, every fifth with the alpha
    # DRAListTypeAttributes: the gates that change the device declaration.
    consumable = seed % 4 != 0
    return CelCostCase(
        id=str(seed),
        expression=random_selector(seed),
        consumable_capacity=consumable,
        list_type_attributes=seed % 5 == 0,
    )


@pytest.fixture(scope="module")
def go_allocator() -> Path:
    return ensure_go_allocator(progress=lambda msg: print(msg, file=sys.stderr, flush=True))


def test_cost_estimate_agrees_with_upstream(go_allocator: Path) -> None:
    count = int(os.environ.get("DRA_CEL_CASES", "1000"))
    first = int(os.environ.get("DRA_CEL_SEED", "0"))
    cases = [_case(seed) for seed in range(first, first + count)]
    theirs = run_cel_costs(go_allocator, cases)
    assert [r.id for r in theirs] == [c.id for c in cases]
    found: list[str] = []
    compiled = over = 0
    for case, their in zip(cases, theirs, strict=True):
        env = Environment(
            consumable_capacity=case.consumable_capacity,
            list_type_attributes=case.list_type_attributes,
        )
        try:
            compile_selector(case.expression)
            gated = new_expression_error(case.expression, env)
            our_error = "" if gated is None else str(gated)
        except CelCompileError as exc:
            our_error = str(exc)
        if bool(our_error) != bool(their.error):
            found.append(
                f"seed {case.id}: compiles here: {not our_error}, upstream: {not their.error} "
                f"({our_error or their.error}): {case.expression}"
            )
            continue
        if their.max_cost is None:
            continue
        compiled += 1
        over += their.max_cost > MAX_SELECTOR_COST
        ours = estimate_cost(case.expression, env).hi
        if ours != their.max_cost:
            found.append(
                f"seed {case.id}: ours {ours}, upstream {their.max_cost}: {case.expression}"
            )
    print(
        f"{len(cases)} selector(s), {compiled} compiled, {over} over the limit, "
        f"{len(found)} disagreement(s)",
        file=sys.stderr,
    )
    assert not found, "\n".join(found[:20])
    # The generator must keep producing selectors that compile and some the limit refuses.
    assert compiled >= 0.9 * len(cases)
    assert over >= 0.03 * len(cases)


def test_type_check_agrees_with_upstream(go_allocator: Path) -> None:
    """Seeded random type clashes (``random_cel.type_error_expressions``) through upstream's
    cel-go compile in ``dra-go-allocate -cel-cost``: the same verdict, and for a compile
    error the same first error (position and message)."""
    count = int(os.environ.get("DRA_CEL_TYPE_CASES", "1000"))
    seed = int(os.environ.get("DRA_CEL_SEED", "0"))
    expressions = type_error_expressions(seed=seed, count=count)
    cases = [
        CelCostCase(id=str(i), expression=e, consumable_capacity=True, list_type_attributes=False)
        for i, e in enumerate(expressions)
    ]
    theirs = run_cel_costs(go_allocator, cases)
    found: list[str] = []
    refused = 0
    for case, their in zip(cases, theirs, strict=True):
        ours = check_selector(case.expression) or ""
        if "compilation failed" not in ours:
            ours = ""
        if bool(ours) != bool(their.error):
            found.append(f"{case.expression}: upstream: {their.error}; ours: {ours}")
            continue
        if their.error:
            refused += 1
            # Upstream's first line; ours is the message without cel-go's source excerpt.
            first = their.error.split("\n", 1)[0]
            if not first.endswith(ours.split(": compilation failed: ", 1)[1]):
                found.append(f"{case.expression}: upstream: {first}; ours: {ours}")
    print(f"{count} type clash(es), {refused} refused, {len(found)} disagreement(s)")
    assert not found, "\n".join(found[:20])
    # Most clashes must be real type errors, and some must type-check.
    assert 0.5 * count <= refused < count
