"""The allocator's conformance table, answered by upstream's Go allocator too.

``packages/allocator/tests/conformance/cases.yaml`` states, per rule, the exact devices our
allocator picks; many of its cases model one release's quirks (``kube_version``). Each
one-step case of the harness's release (``DRA_E2E_KUBE_VERSION``, default 1.37) is run
through ``dra-go-allocate`` of that release as well, so a rule the table states must be
upstream's rule, not only ours. Cases in several steps (allocations committed in between)
are left to the unit test.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_allocator.features import LATEST_KUBE_MINOR, parse_kube_version
from dra_e2e.go_allocator import OracleCase, ensure_go_allocator, run_batch
from oracle_compare import disagreement_any_order, harness_version, python_answer

pytestmark = pytest.mark.slow

ALLOCATOR_TESTS = Path(__file__).resolve().parents[3] / "packages" / "allocator" / "tests"
# Enough runs that a pool order Go takes one time in eight is seen (1.35 ranges over a map).
RUNS = 8


def _case_objects() -> Callable[[Mapping[str, Any]], list[dict[str, Any]]]:
    """The conformance table's object builder (a test helper of the allocator package)."""
    spec = importlib.util.spec_from_file_location(
        "allocation_builders", ALLOCATOR_TESTS / "allocation_builders.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    builder: Callable[[Mapping[str, Any]], list[dict[str, Any]]] = module.case_objects
    return builder


def conformance_cases(minor: int) -> list[OracleCase]:
    """The table's one-step cases of release ``1.<minor>`` as oracle cases."""
    table: list[dict[str, Any]] = yaml.safe_load(
        (ALLOCATOR_TESTS / "conformance" / "cases.yaml").read_text(encoding="utf-8")
    )
    build = _case_objects()
    cases = []
    for case in table:
        release = parse_kube_version(case["kube_version"]) if "kube_version" in case else None
        if (release or LATEST_KUBE_MINOR) != minor or "steps" in case:
            continue
        claims = [c["name"] if "/" in c["name"] else f"default/{c['name']}" for c in case["claims"]]
        cases.append(
            OracleCase(
                id=case["name"],
                objects=build(case),
                claims=claims,
                node=case.get("node", ""),
                features=case.get("features"),
            )
        )
    return cases


def test_conformance_cases_agree_with_upstream() -> None:
    version = harness_version()
    minor = int(version.split(".")[1])
    cases = conformance_cases(minor)
    assert len(cases) >= (5 if minor < LATEST_KUBE_MINOR else 60), [c.id for c in cases]
    binary = ensure_go_allocator(
        progress=lambda msg: print(msg, file=sys.stderr, flush=True), version=version
    )
    batches = [run_batch(binary, cases) for _ in range(RUNS)]
    found = []
    for i, case in enumerate(cases):
        diff = disagreement_any_order(
            python_answer(case, kube_minor=minor), [batch[i] for batch in batches]
        )
        if diff is not None:
            found.append(f"{case.id}: {diff[:800]}")
    print(f"{len(cases)} conformance cases of 1.{minor} through upstream's allocator")
    assert not found, f"{len(found)} of {len(cases)} disagree:\n" + "\n".join(found)
