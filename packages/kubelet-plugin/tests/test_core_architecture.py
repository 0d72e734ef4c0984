"""The core is driver-agnostic: it imports nothing of the GPU plugin and nothing of dra_nvlib,
so the compute-domain plugin (and any other driver) can build on it."""

from __future__ import annotations

import ast
from pathlib import Path

import dra_kubelet_plugin.core

CORE = Path(dra_kubelet_plugin.core.__file__).parent


def _imports(path: Path) -> list[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    package = "dra_kubelet_plugin." + ".".join(path.relative_to(CORE.parent).parent.parts)
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.append(module)
            # ``from dra_kubelet_plugin import x`` imports the submodule x.
            names.extend(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_core_imports_only_the_core_of_this_package_and_no_device_library() -> None:
    sources = sorted(CORE.rglob("*.py"))
    assert len(sources) > 15
    offending: list[str] = []
    for path in sources:
        for name in _imports(path):
            top = name.split(".")[0]
            if top == "dra_nvlib":
                offending.append(f"{path.relative_to(CORE)}: {name}")
            if top == "dra_kubelet_plugin" and not (
                name == "dra_kubelet_plugin.core" or name.startswith("dra_kubelet_plugin.core.")
            ):
                offending.append(f"{path.relative_to(CORE)}: {name}")
    assert offending == []


def test_importing_the_core_loads_neither_the_gpu_plugin_nor_dra_nvlib() -> None:
    import subprocess
    import sys

    probe = (
        "import sys, dra_kubelet_plugin.core.runner, dra_kubelet_plugin.core.driver;"
        "bad = sorted(m for m in sys.modules if m.startswith('dra_nvlib') or"
        " (m.startswith('dra_kubelet_plugin.') and not m.startswith('dra_kubelet_plugin.core')));"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
