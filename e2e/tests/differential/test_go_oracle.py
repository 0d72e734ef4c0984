"""``kubectl dra allocate`` against the upstream Go allocator, on seeded random scenarios.

``dra-go-allocate`` (``dra_e2e.go_allocator``) links ``k8s.io/dynamic-resource-allocation``
at the harness's Kubernetes version and answers the same questions as our allocator, in one
process for the whole batch. Every answer must agree: exit code, and for allocated claims the
node and the whole allocation (results, configs, node selector); for unsatisfiable ones which
claims stayed pending.

``DRA_ORACLE_CASES`` sets the number of random scenarios (default 1000; 10000 on demand);
``DRA_ORACLE_SEED`` the first seed. ``DRA_E2E_KUBE_VERSION=1.36`` compares at 1.36 instead
(upstream's allocator of v1.36.5, ours with ``--kube-version 1.36``; on demand, CI keeps
1.37), ``DRA_E2E_KUBE_VERSION=1.35`` at 1.35 (v1.35.4). 1.35 tries a node's pools in Go map
order, random in every call (1.36 sorts them), so there upstream answers the batch
``DRA_ORACLE_ORDER_RUNS`` times (default 8) and ours must give one of its answers, or, where
the runs differ, place every claim as one of them does
(``oracle_compare.disagreement_any_order``). The checked-in cases in ``oracle_cases/``
(each a disagreement found earlier, kept before it was fixed) run every time. Feature
subsets select each of upstream's allocator variants (stable, incubating, experimental); the
stable one (every one at 1.35) ranges over a Go map of pools: ours takes them as first
listed, Go's likeliest order, and where that disagrees is compared in each other order Go may
have used. The experimental one (DRAListTypeAttributes) gets list-valued attributes and
constraints on them. Disagreeing cases of a run are written to ``$DRA_ORACLE_SAVE``
(default: a temporary directory, printed), ready to be checked in.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from dra_allocator.features import EXPERIMENTAL, INCUBATING, STABLE
from dra_e2e.go_allocator import OracleCase, ensure_go_allocator, run_batch
from oracle_compare import (
    agrees_in_some_pool_order,
    case_features,
    comparable,
    disagreement,
    disagreement_any_order,
    harness_version,
    load_cases,
    python_answer,
    save_case,
)
from random_cases import random_case

pytestmark = pytest.mark.slow

# Up to this minor release upstream walks a node's pools in Go map order (1.36 sorts them).
RANDOM_POOL_ORDER_UNTIL = 35


def _cases() -> list[OracleCase]:
    count = int(os.environ.get("DRA_ORACLE_CASES", "1000"))
    first = int(os.environ.get("DRA_ORACLE_SEED", "0"))
    minor = int(harness_version().split(".")[1])
    randoms = (random_case(seed, kube_minor=minor) for seed in range(first, first + count))
    return [*load_cases(), *randoms]


@pytest.fixture(scope="module")
def go_allocator() -> Path:
    return ensure_go_allocator(
        progress=lambda msg: print(msg, file=sys.stderr, flush=True), version=harness_version()
    )


def test_checked_in_cases_are_kept() -> None:
    cases = load_cases()
    assert len(cases) >= 6
    assert all(case.claims for case in cases)


def _random_pool_order(minor: int) -> bool:
    """Whether upstream's allocator of ``1.<minor>`` tries a node's pools in random order."""
    return minor <= RANDOM_POOL_ORDER_UNTIL


def test_python_allocator_agrees_with_upstream(go_allocator: Path) -> None:
    cases = _cases()
    minor = int(harness_version().split(".")[1])
    runs = int(os.environ.get("DRA_ORACLE_ORDER_RUNS", "8")) if _random_pool_order(minor) else 1
    batches = [run_batch(go_allocator, cases) for _ in range(runs)]
    for theirs in batches:
        assert [r.id for r in theirs] == [c.id for c in cases]
    found: list[str] = []
    outcomes: dict[int, int] = {}
    variants: dict[str, int] = {}
    reordered = timed_out = varying = 0
    save_dir = Path(os.environ.get("DRA_ORACLE_SAVE") or tempfile.mkdtemp(prefix="dra-oracle-"))
    for i, case in enumerate(cases):
        their_runs = [theirs[i] for theirs in batches]
        their = their_runs[0]
        outcomes[their.exit] = outcomes.get(their.exit, 0) + 1
        variant = case_features(case, kube_minor=minor).variant
        variants[variant] = variants.get(variant, 0) + 1
        if their.exit == 2 and "context deadline exceeded" in (their.error or ""):
            # Upstream gave up at its 10 s deadline: how far it got depends on the
            # machine's speed, not on the semantics, so there is no answer to compare.
            timed_out += 1
            continue
        ours = python_answer(case, kube_minor=minor)
        if runs > 1:
            varying += len({str(comparable(r)) for r in their_runs}) > 1
            diff = disagreement_any_order(ours, their_runs)
        else:
            diff = disagreement(ours, their)
        if (
            diff is not None
            and case_features(case, kube_minor=minor).random_pool_order
            and any(agrees_in_some_pool_order(case, r, kube_minor=minor) for r in their_runs)
        ):
            # Upstream (the stable variant, or any at 1.35) searched the pools in another
            # (random) order than ours.
            diff = None
            reordered += 1
        if diff is not None:
            save_case(case, diff, directory=save_dir)
            found.append(f"{case.id}: {diff[:600]}")
    print(
        f"{len(cases)} cases, upstream exit codes {sorted(outcomes.items())}, "
        f"variants {sorted(variants.items())}, answers in another pool order: {reordered}, "
        f"upstream timed out (not compared): {timed_out}"
    )
    if runs > 1:
        print(f"{varying} case(s) where upstream's {runs} runs answered differently (pool order)")
    # The generator must keep exercising every outcome and variant, or agreement proves little.
    assert set(outcomes) == {0, 1, 2}, outcomes
    assert set(variants) == {STABLE, INCUBATING, EXPERIMENTAL}, variants
    assert not found, f"{len(found)} disagreement(s), cases saved in {save_dir}:\n" + "\n".join(
        found[:10]
    )
