"""The step runner and its summary: verdicts, budgets, exit status (pure, no GPU)."""

from __future__ import annotations

import itertools

from dra_e2e.gpu_check.runner import (
    Step,
    StepFailed,
    StepResult,
    StepSkipped,
    Verdict,
    exit_status,
    format_summary,
    run_steps,
)


def _skip(_: float) -> str:
    raise StepSkipped("no podman")


def _fail(_: float) -> str:
    raise StepFailed("CDI spec left after unprepare")


def _bug(_: float) -> str:
    raise KeyError("uuid")


def test_each_step_gets_its_verdict_and_the_others_still_run() -> None:
    ticks = itertools.count()
    seen: list[StepResult] = []
    results = run_steps(
        [
            Step("ok", 10, lambda budget: f"budget {budget:.0f}"),
            Step("skipped", 10, _skip),
            Step("failed", 10, _fail),
            Step("bug", 10, _bug),
        ],
        clock=lambda: float(next(ticks)),
        report=seen.append,
    )
    assert seen == results
    assert [(r.name, r.verdict, r.detail) for r in results] == [
        ("ok", Verdict.PASS, "budget 10"),
        ("skipped", Verdict.SKIP, "no podman"),
        ("failed", Verdict.FAIL, "CDI spec left after unprepare"),
        ("bug", Verdict.FAIL, "KeyError: 'uuid'"),
    ]
    assert all(r.seconds == 1.0 for r in results)
    assert exit_status(results) == 1


def test_a_step_over_its_budget_fails() -> None:
    times = iter([0.0, 45.0])
    results = run_steps([Step("slow", 30, lambda _: "done")], clock=lambda: next(times))
    assert results[0].verdict is Verdict.FAIL
    assert results[0].detail == "took 45s, over its 30s"


def test_summary_table_and_exit_status() -> None:
    results = [
        StepResult("nvml contract suite", Verdict.PASS, "7 passed", 3.25),
        StepResult("container", Verdict.SKIP, "no podman", 0.0),
    ]
    assert format_summary(results).splitlines() == [
        "RESULT  STEP                   TIME  DETAIL",
        "PASS    nvml contract suite    3.2s  7 passed",
        "SKIP    container              0.0s  no podman",
        "gpu-check: 1 passed, 0 failed, 1 skipped in 3.2s",
    ]
    assert exit_status(results) == 0
    assert exit_status([]) == 0
