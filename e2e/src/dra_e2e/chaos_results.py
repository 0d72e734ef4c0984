"""The numbers of the day-two scenarios (issue #23, item 8) for ``make bench BENCH=chaos``.

Each scenario (the tests of ``e2e/tests/chaos``, the surge upgrade and the GPU-loss tests of
``e2e/tests/driver``) records its figures with the ``chaos_record`` fixture
(:mod:`dra_e2e.pytest_plugin`): one JSON object a line, named after the test, printed and
appended to the file ``$DRA_E2E_CHAOS_RESULTS`` names when the benchmark sets it
(``e2e/bench/bench_chaos.py``), which then prints each figure next to its target.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

__all__ = ["RESULTS_ENV", "ChaosRecord", "read_results", "record_numbers"]

#: Where the scenarios append their numbers (one JSON object a line); the benchmark sets it.
RESULTS_ENV = "DRA_E2E_CHAOS_RESULTS"


class ChaosRecord(Protocol):
    """``record(**numbers)``: the figures of the calling test (see :func:`record_numbers`)."""

    def __call__(self, **numbers: float) -> None:
        """Print the test's numbers and append them to ``$DRA_E2E_CHAOS_RESULTS``."""
        ...


def record_numbers(
    scenario: str, numbers: Mapping[str, float], *, env: Mapping[str, str] | None = None
) -> dict[str, object]:
    """Print ``scenario``'s numbers (``[chaos] {...}``) and append them as one line to the
    file ``env[RESULTS_ENV]`` names, when set (``env``: ``os.environ``); return the entry."""
    entry: dict[str, object] = {"scenario": scenario, **numbers}
    print(f"[chaos] {json.dumps(entry)}")
    target = (os.environ if env is None else env).get(RESULTS_ENV)
    if target:
        with Path(target).open("a") as out:
            out.write(json.dumps(entry) + "\n")
    return entry


def read_results(path: Path) -> list[dict[str, object]]:
    """The entries appended to ``path``, in order (none when the file is missing)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
