"""Report the Python modules of the workspace that are longer than 600 lines: sources, tests,
benchmarks and tools alike.

A module past the limit holds more than one concept: split it by concept (as ``dra_cel``'s
compiler is split by expression form) instead of raising the limit. Generated code
(``_proto/``) is not counted. Exits 1 when any module is over the limit::

    python scripts/module_size.py                      # the whole workspace
    python scripts/module_size.py packages/nvlib/src   # chosen roots
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: Every folder of the repository that holds Python: each package's sources, tests and
#: benchmarks, the end-to-end harness with its tests and benchmarks, and the tools.
DEFAULT_ROOTS = (
    *sorted(
        str(p.relative_to(REPO))
        for pattern in ("*/src", "*/tests", "*/bench")
        for p in (REPO / "packages").glob(pattern)
    ),
    "e2e/src",
    "e2e/tests",
    "e2e/bench",
    "bench",
    "deployments",
    "images",
    "scripts",
)
MAX_LINES = 600
#: Directories of generated code (the gRPC stubs), which nobody edits by hand.
GENERATED = "_proto"


def modules(roots: Sequence[Path]) -> list[Path]:
    """Every ``.py`` file below the roots, generated code left out."""
    return [
        path
        for root in roots
        for path in sorted(root.rglob("*.py"))
        if GENERATED not in path.relative_to(root).parts
    ]


def oversized(roots: Sequence[Path], *, limit: int = MAX_LINES) -> list[tuple[Path, int]]:
    """The modules longer than ``limit`` lines, with their line counts."""
    found = []
    for path in modules(roots):
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > limit:
            found.append((path, count))
    return found


def main(argv: Sequence[str]) -> int:
    """Print the modules over the limit in the given (or default) roots; 1 if there are any."""
    roots = [Path(a).resolve() for a in argv] or [REPO / r for r in DEFAULT_ROOTS]
    found = oversized(roots)
    for path, count in found:
        rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        print(f"{rel}: {count} lines (over {MAX_LINES})")
    print(f"{len(modules(roots))} modules, {len(found)} over {MAX_LINES} lines")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
