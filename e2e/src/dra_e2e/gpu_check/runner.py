"""Runs the check's steps in order, each under its own time budget, and sums them up.

Pure apart from calling the steps: a step is a function of its budget in seconds that
returns what it found or raises :class:`StepFailed`; anything else it raises is a failure too,
so one broken step never hides the summary of the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum


class Verdict(Enum):
    """How one step ended."""

    PASS = "PASS"
    FAIL = "FAIL"
    SKIP = "SKIP"


class StepFailed(Exception):
    """A step found something wrong; ``detail`` says what, in one line."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class StepSkipped(Exception):
    """A step cannot run on this machine (e.g. no container engine); ``detail`` says why."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class Step:
    """One check: ``run(budget_s)`` returns a one-line finding or raises."""

    name: str
    budget_s: float
    run: Callable[[float], str]


@dataclass(frozen=True)
class StepResult:
    """What one step found and how long it took."""

    name: str
    verdict: Verdict
    detail: str
    seconds: float


def run_steps(
    steps: Sequence[Step],
    *,
    clock: Callable[[], float] = time.monotonic,
    report: Callable[[StepResult], None] = lambda _: None,
) -> list[StepResult]:
    """Run every step in order; ``report`` sees each result as soon as it is known."""
    results = []
    for step in steps:
        start = clock()
        try:
            verdict, detail = Verdict.PASS, step.run(step.budget_s)
        except StepSkipped as exc:
            verdict, detail = Verdict.SKIP, exc.detail
        except StepFailed as exc:
            verdict, detail = Verdict.FAIL, exc.detail
        except Exception as exc:  # a bug in a step must not hide the others' results
            verdict, detail = Verdict.FAIL, f"{type(exc).__name__}: {exc}"
        elapsed = clock() - start
        if verdict is not Verdict.FAIL and elapsed > step.budget_s:
            verdict, detail = Verdict.FAIL, f"took {elapsed:.0f}s, over its {step.budget_s:.0f}s"
        result = StepResult(step.name, verdict, detail, elapsed)
        report(result)
        results.append(result)
    return results


def format_summary(results: Sequence[StepResult]) -> str:
    """A table: one line per step (verdict, name, seconds, finding) and a total line."""
    width = max((len(r.name) for r in results), default=4)
    lines = [f"{'RESULT':<6}  {'STEP':<{width}}  {'TIME':>6}  DETAIL"]
    for r in results:
        lines.append(f"{r.verdict.value:<6}  {r.name:<{width}}  {r.seconds:>5.1f}s  {r.detail}")
    counts = {v: sum(r.verdict is v for r in results) for v in Verdict}
    total = sum(r.seconds for r in results)
    lines.append(
        f"gpu-check: {counts[Verdict.PASS]} passed, {counts[Verdict.FAIL]} failed, "
        f"{counts[Verdict.SKIP]} skipped in {total:.1f}s"
    )
    return "\n".join(lines)


def exit_status(results: Sequence[StepResult]) -> int:
    """1 when any step failed, else 0."""
    return int(any(r.verdict is Verdict.FAIL for r in results))
