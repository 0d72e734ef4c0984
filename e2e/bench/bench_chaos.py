"""Chaos: the day-two faults of issue #23 (item 8) on the real harness, with their numbers.

On demand only (``make bench BENCH=chaos``; the unfiltered ``make bench`` leaves it out): it
starts a cluster. It runs the e2e scenarios of ``e2e/tests/chaos`` (a webhook rollout while
claims are created, kube-apiserver restarted under the controllers and plugins, the GPU plugin's
container killed with claims of every kind prepared), which append their numbers to a file, and
prints each figure next to its target: zero failed calls and restarts, recovery in seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "e2e" / "tests" / "chaos"
#: The environment variable the scenarios append their numbers to (see test_chaos.py).
RESULTS_ENV = "DRA_E2E_CHAOS_RESULTS"
#: Figures whose target is zero: a refused create, a restarted component.
ZERO_TARGETS = ("refused", "restarts")


def format_entry(entry: dict[str, object]) -> list[str]:
    """One line per figure of a scenario, a target next to the counts that have one."""
    lines = [str(entry["scenario"])]
    for key, value in entry.items():
        if key == "scenario":
            continue
        target = "  (target 0)" if key in ZERO_TARGETS else ""
        lines.append(f"  {key:<22} {value}{target}")
    return lines


def main() -> int:
    """Run the scenarios, print their numbers; non-zero when a scenario failed."""
    with tempfile.TemporaryDirectory(prefix="dra-chaos-") as tmp:
        results = Path(tmp) / "results.jsonl"
        env = {**os.environ, RESULTS_ENV: str(results)}
        command = [sys.executable, "-m", "pytest", str(SCENARIOS), "-q", "-p", "no:cacheprovider"]
        rc = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
        entries = (
            [json.loads(line) for line in results.read_text().splitlines()]
            if (results.exists())
            else []
        )
    print("\nchaos scenarios (issue #23 item 8):")
    for entry in entries:
        print("\n".join(format_entry(entry)))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
