"""Report import cycles between the modules of the workspace, and imports hidden in functions.

Every ``import`` counts, at any depth: a cycle hidden behind a function-level import or an
``if TYPE_CHECKING:`` block is still a cycle. An import inside a function (outside
``TYPE_CHECKING``) is listed too, since that is how cycles get hidden. Exits 1 when there is a
cycle or a hidden import (one whose line says ``# deferred import`` is a deliberate deferral)::

    python scripts/import_cycles.py                      # the default source roots
    python scripts/import_cycles.py packages/nvlib/src   # chosen roots
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_ROOTS = (
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "packages").glob("*/src")),
    "e2e/src",
)
#: A function-level import marked so on its line is a deliberate deferral (a command that must
#: start fast), not a hidden cycle: it is still an edge of the graph, so it cannot hide one.
DEFERRED_MARK = "# deferred import"


def module_name(path: Path, root: Path) -> str:
    """``pkg.sub.mod`` for ``root/pkg/sub/mod.py`` (a package's ``__init__`` is the package)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    hidden: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            hidden |= {id(child) for child in ast.walk(node)}
    return hidden


def _imported(
    node: ast.Import | ast.ImportFrom, module: str, *, is_package: bool, known: Collection[str]
) -> set[str]:
    """The known modules an import statement loads (the longest known prefix of each name)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, base] if base else package)
        # ``from pkg import sub`` loads the submodule; ``from pkg import name`` the package.
        names = [f"{base}.{alias.name}" for alias in node.names]
    found: set[str] = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


def build_graph(roots: Sequence[Path]) -> tuple[dict[str, set[str]], list[str]]:
    """Module -> the workspace modules it imports; and every import made inside a function."""
    files = {module_name(p, root): p for root in roots for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {name: set() for name in files}
    nested: list[str] = []
    for name, path in files.items():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        tree = ast.parse(source, str(path))
        guarded = _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            found = _imported(node, name, is_package=path.name == "__init__.py", known=files.keys())
            graph[name] |= found
            deferred = DEFERRED_MARK in lines[node.lineno - 1]
            if found and node.col_offset > 0 and id(node) not in guarded and not deferred:
                rel = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                nested.append(f"{rel}:{node.lineno}: imports {', '.join(sorted(found))}")
    return graph, nested


def cycles(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for succ in edges:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        yield sorted(component)


def main(argv: Sequence[str]) -> int:
    """Print hidden imports and cycles of the given (or default) roots; 1 if there are any."""
    roots = [Path(a).resolve() for a in argv] or [REPO / r for r in DEFAULT_ROOTS]
    graph, nested = build_graph(roots)
    for line in nested:
        print(f"function-level import: {line}")
    found = list(cycles(graph))
    for component in found:
        print("cycle: " + " <-> ".join(component))
        for module in component:
            print(f"    {module} -> {', '.join(sorted(graph[module] & set(component)))}")
    edges = sum(len(targets) for targets in graph.values())
    print(
        f"{len(graph)} modules, {edges} imports, {len(found)} cycles, "
        f"{len(nested)} function-level imports"
    )
    return 1 if found or nested else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
