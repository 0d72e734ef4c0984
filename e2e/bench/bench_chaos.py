"""Chaos: the day-two faults of issue #23 (item 8) on the real harness, with their numbers.

On demand only (``make bench BENCH=chaos``; the unfiltered ``make bench`` leaves it out): it
starts a cluster. It runs the e2e scenarios of ``e2e/tests/chaos`` (a webhook rollout while
claims are created, kube-apiserver restarted under the controllers and plugins, the GPU plugin's
container killed with claims of every kind prepared) and the day-two scenarios that need an
install of their own and stay with the driver tests (:data:`DRIVER_SCENARIOS`: a surge upgrade
while GPU pods come and go, a GPU lost while the plugin runs and before it starts). Each
records its numbers through the ``chaos_record`` fixture (:mod:`dra_e2e.chaos_results`) into
the file this script names in ``$DRA_E2E_CHAOS_RESULTS``; each figure is printed next to its
target: zero failed calls, stuck pods and restarts, recovery in seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from dra_e2e.chaos_results import RESULTS_ENV, read_results

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "e2e" / "tests" / "chaos"
DRIVER_TESTS = ROOT / "e2e" / "tests" / "driver"
#: Day-two scenarios among the driver tests (each installs the chart its own way; moving them
#: into the chaos module would run them twice in CI).
DRIVER_SCENARIOS = (
    f"{DRIVER_TESTS / 'test_seamless_upgrade.py'}",
    f"{DRIVER_TESTS / 'test_health.py'}::test_gpu_lost_at_run_time_costs_that_gpu_only",
    f"{DRIVER_TESTS / 'test_health.py'}::test_gpu_lost_before_plugin_start_costs_that_gpu_only",
)
#: Figures whose target is zero: a refused create or failed prepare, a stuck pod, a claim
#: prepared twice, a restarted component (the plugin, for a lost GPU).
ZERO_TARGETS = ("refused", "restarts", "failed_prepares", "stuck", "prepared_twice")
#: Figures with another target.
TARGETS = {
    "plugins_at_once": "2 (old and new served together)",
    "plugin_restarts": "1 (the kill itself)",
}


def target_of(key: str) -> str:
    """The target printed next to a figure (empty: a measurement without one)."""
    if key in ZERO_TARGETS:
        return "0"
    return TARGETS.get(key, "")


def format_entry(entry: dict[str, object]) -> list[str]:
    """One line per figure of a scenario, a target next to the counts that have one."""
    lines = [str(entry["scenario"])]
    for key, value in entry.items():
        if key == "scenario":
            continue
        target = target_of(key)
        lines.append(f"  {key:<22} {value}{f'  (target {target})' if target else ''}")
    return lines


def main() -> int:
    """Run the scenarios, print their numbers; non-zero when a scenario failed."""
    with tempfile.TemporaryDirectory(prefix="dra-chaos-") as tmp:
        results = Path(tmp) / "results.jsonl"
        env = {**os.environ, RESULTS_ENV: str(results)}
        command = [
            sys.executable, "-m", "pytest", str(SCENARIOS), *DRIVER_SCENARIOS,
            "-q", "-p", "no:cacheprovider",
        ]  # fmt: skip
        rc = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
        entries = read_results(results)
    print("\nchaos scenarios (issue #23 item 8):")
    for entry in entries:
        print("\n".join(format_entry(entry)))
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
