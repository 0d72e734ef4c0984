"""Run every benchmark (``packages/*/bench/*.py``, ``e2e/bench/*.py``), or those named.

Each benchmark is a standalone script that prints its own numbers next to a named baseline
measured in the same run; this runner only finds them and runs them one after another, so a
slow or failing one is reported without hiding the others.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Run only when named: ``make bench BENCH=scale`` and ``BENCH=chaos`` start a cluster;
# ``BENCH=explain`` (a 1,000-node cluster in memory) and ``BENCH=controller_memory`` (a heap
# census of a 1,000-node cache) take minutes.
ON_DEMAND = ("bench_scale.py", "bench_chaos.py", "bench_explain.py", "bench_controller_memory.py")


def discover() -> list[Path]:
    """Every benchmark script of the workspace, in a stable order."""
    found = [*ROOT.glob("packages/*/bench/*.py"), *ROOT.glob("e2e/bench/*.py")]
    return sorted(p for p in found if not p.name.startswith("_"))


def main(argv: list[str]) -> int:
    """Run the benchmarks whose file name contains one of ``argv`` (when empty, all but the
    on-demand ones)."""
    if argv:
        scripts = [p for p in discover() if any(a in p.name for a in argv)]
    else:
        scripts = [p for p in discover() if p.name not in ON_DEMAND]
    failed: list[str] = []
    for script in scripts:
        rel = script.relative_to(ROOT)
        print(f"\n=== {rel} ===", flush=True)
        if subprocess.run([sys.executable, str(script)], cwd=ROOT, check=False).returncode != 0:
            failed.append(str(rel))
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
