"""Our allocator's answer to an :class:`OracleCase` and the comparison with upstream's.

The Python side runs in process (the code behind ``kubectl dra allocate``), so thousands
of cases stay cheap; the Go side answers a whole batch in one process.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import os
import random
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dra_allocator.cel_engine import CelEngine
from dra_allocator.errors import AllocationError
from dra_allocator.features import LATEST_KUBE_MINOR, Features
from dra_allocator.inputs import Document
from dra_allocator.pools import PoolID
from dra_allocator.snapshot import build_snapshot
from dra_e2e.go_allocator import OracleCase, OracleResult
from dra_e2e.versions import KUBERNETES_VERSION, resolve_kube_version
from kubectl_dra.allocate_report import EXIT_ERROR, run_allocate

CASES_DIR = Path(__file__).parent / "oracle_cases"


def harness_version() -> str:
    """The release to compare at: the harness's (``DRA_E2E_KUBE_VERSION``, default 1.37)."""
    return resolve_kube_version(os.environ.get("DRA_E2E_KUBE_VERSION") or KUBERNETES_VERSION)


def case_features(case: OracleCase, *, kube_minor: int = LATEST_KUBE_MINOR) -> Features:
    """The case's ``--features`` (defaults without) at ``--kube-version 1.<kube_minor>``."""
    features = Features.parse(case.features) if case.features is not None else Features()
    return replace(features, kube_minor=kube_minor)


def python_answer(
    case: OracleCase,
    *,
    kube_minor: int = LATEST_KUBE_MINOR,
    pool_order: Sequence[PoolID] | None = None,
) -> OracleResult:
    """What ``kubectl dra allocate --kube-version 1.<kube_minor>`` answers for the case.

    ``pool_order`` fixes the stable variant's pool order (see :func:`stable_pool_orders`).
    """
    docs = [Document(source=case.id, index=i, data=obj) for i, obj in enumerate(case.objects)]
    try:
        features = case_features(case, kube_minor=kube_minor)
        report = run_allocate(
            build_snapshot(docs),
            engine=CelEngine(),
            features=features,
            node=case.node or None,
            claim_keys=case.claims,
            # Both must find the same answer, however slow a loaded machine is; only a
            # search upstream gives up on (10 s) may time out here too.
            timeout_s=120.0,
            pool_order=pool_order,
        )
    except AllocationError as exc:
        return OracleResult(id=case.id, exit=EXIT_ERROR, error=str(exc))
    return OracleResult(id=case.id, exit=report.exit_code, report=report.report)


def stable_pool_orders(
    case: OracleCase, theirs: OracleResult, *, limit: int = 720
) -> Iterator[list[PoolID]]:
    """Pool orders upstream's stable allocator may have searched in, likeliest first.

    It gathers a node's pools into a Go map and ranges over it, so every call sees them in
    a random order (whether a node fits does not depend on it; the devices picked, and a
    CEL error on a device looked at before a solution is found, do). Tried: the pools of
    upstream's answer in the order its results name them, then node-local pools before
    the others, then every order of the pools with devices (sampled past ``limit``).
    """
    hinted: list[PoolID] = []
    for entry in (theirs.report.get("claims") or {}).values():
        allocation = entry.get("allocation") if entry.get("allocated") else None
        for result in ((allocation or {}).get("devices") or {}).get("results") or []:
            pool_id = (result.get("driver", ""), result.get("pool", ""))
            if pool_id not in hinted:
                hinted.append(pool_id)
    local: list[PoolID] = []
    shared: list[PoolID] = []
    for obj in case.objects:
        spec = obj.get("spec") or {}
        if obj.get("kind") != "ResourceSlice" or not spec.get("devices"):
            continue
        pool_id = (spec.get("driver", ""), (spec.get("pool") or {}).get("name", ""))
        group = local if spec.get("nodeName") else shared
        if pool_id not in local and pool_id not in shared:
            group.append(pool_id)
    pools = sorted(local + shared)
    by_locality = sorted(local) + sorted(shared)
    yield hinted + [p for p in by_locality if p not in hinted]
    yield by_locality
    yield sorted(shared) + sorted(local)
    if math.factorial(len(pools)) <= limit:
        yield from (list(order) for order in itertools.permutations(pools))
        return
    rng = random.Random(case.id)
    for _ in range(limit):
        yield rng.sample(pools, k=len(pools))


def agrees_in_some_pool_order(
    case: OracleCase, theirs: OracleResult, *, kube_minor: int = LATEST_KUBE_MINOR
) -> bool:
    """Whether ours, in one of the pool orders Go may have used (its stable variant, or any
    variant of 1.35: a Go map), agrees."""
    return any(
        disagreement(python_answer(case, kube_minor=kube_minor, pool_order=order), theirs) is None
        for order in stable_pool_orders(case, theirs)
    )


def _normalized_allocation(allocation: Mapping[str, Any]) -> Any:
    # Round-trip through JSON so Quantity-like values compare as the strings both print.
    out = json.loads(json.dumps(allocation, default=str))
    out.pop("allocationTimestamp", None)
    for result in out.get("devices", {}).get("results", []):
        if "shareID" in result:
            result["shareID"] = "<present>"
    return out


def comparable(result: OracleResult) -> Any:
    """The part of an answer both allocators must agree on.

    Exit code always; for allocations the node and the allocation of every claim; for
    unsatisfiable cases which claims stayed unallocated (the reasons are ours alone);
    for errors nothing more (the messages differ by design).
    """
    out: dict[str, Any] = {"exit": result.exit}
    if result.exit == EXIT_ERROR:
        return out
    claims = {}
    for key, entry in (result.report.get("claims") or {}).items():
        if entry.get("allocated"):
            claims[key] = {
                "node": entry.get("node", ""),
                "allocation": _normalized_allocation(entry.get("allocation") or {}),
            }
        else:
            claims[key] = {"allocated": False}
    out["claims"] = claims
    return out


def disagreement(ours: OracleResult, theirs: OracleResult) -> str | None:
    """A short description of how the answers differ, or None when they agree."""
    a, b = comparable(ours), comparable(theirs)
    if a == b:
        return None
    detail = {"python": a, "go": b}
    if ours.error or theirs.error:
        detail["errors"] = {"python": ours.error, "go": theirs.error}
    return json.dumps(detail, sort_keys=True)[:4000]


def _placement(answer: Any) -> Any:
    """Exit code and where each claim went (or that it stayed pending), without devices."""
    claims = answer.get("claims") or {}
    return answer["exit"], {key: entry.get("node", False) for key, entry in claims.items()}


def disagreement_any_order(ours: OracleResult, runs: Sequence[OracleResult]) -> str | None:
    """:func:`disagreement` against several runs of an allocator that tries pools in random order.

    Kubernetes 1.35 walks a node's pools in Go map order, different in every call, so where
    several pools could serve a request upstream's devices vary between runs. Ours (pools in
    listing order, Go's likeliest) agrees when its answer is one of the runs' answers; when the runs
    themselves differ, when it places every claim as one of them does (same exit code,
    same nodes), since its pool order is just one more of the orders upstream may take.
    """
    answers: list[Any] = []
    for run in runs:
        answer = comparable(run)
        if answer not in answers:
            answers.append(answer)
    mine = comparable(ours)
    if mine in answers:
        return None
    if len(answers) > 1 and _placement(mine) in [_placement(a) for a in answers]:
        return None
    detail: dict[str, Any] = {"python": mine, "go": answers}
    errors = {r.error for r in runs if r.error}
    if ours.error or errors:
        detail["errors"] = {"python": ours.error, "go": sorted(errors)}
    return json.dumps(detail, sort_keys=True)[:4000]


def save_case(case: OracleCase, note: str, *, directory: Path = CASES_DIR) -> Path:
    """Write a disagreeing case in the format of the checked-in ``oracle_cases/``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{case.id}.json"
    data = copy.deepcopy(case.to_json())
    data["note"] = note
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def load_cases() -> list[OracleCase]:
    """The checked-in cases, replayed by every run."""
    cases = []
    for path in sorted(CASES_DIR.glob("*.json")):
        data = json.loads(path.read_text())
        cases.append(
            OracleCase(
                id=data["id"],
                objects=data["objects"],
                claims=data.get("claims") or (),
                node=data.get("node") or "",
                features=data.get("features"),
            )
        )
    return cases
