"""The core is driver-agnostic: it imports nothing of the GPU plugin, nothing of the
compute-domain plugin, nothing of dra_nvlib or dra_sharing, so any driver can build on it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import dra_kubelet_core

CORE = Path(dra_kubelet_core.__file__).parent
#: Workspace distributions the core may use (besides itself and third-party libraries).
ALLOWED_WORKSPACE = {"dra_api_types", "dra_kube_client", "dra_kubelet_core"}
WORKSPACE = {
    "dra_api_types",
    "dra_kube_client",
    "dra_kubelet_core",
    "dra_kubelet_plugin",
    "dra_computedomain",
    "dra_nvlib",
    "dra_sharing",
    "dra_controller",
    "dra_e2e",
}


def _imports(path: Path) -> list[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    package = ".".join(("dra_kubelet_core", *path.relative_to(CORE).parent.parts))
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
    return names


def test_core_imports_no_driver_and_no_device_library() -> None:
    sources = sorted(CORE.rglob("*.py"))
    assert len(sources) > 15
    offending = [
        f"{path.relative_to(CORE)}: {name}"
        for path in sources
        for name in _imports(path)
        if name.split(".")[0] in WORKSPACE - ALLOWED_WORKSPACE
    ]
    assert offending == []


def test_importing_the_core_loads_no_driver_and_no_device_library() -> None:
    probe = (
        "import sys, dra_kubelet_core, dra_kubelet_core.runner, dra_kubelet_core.driver,"
        " dra_kubelet_core.device_nodes;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in"
        " ('dra_nvlib', 'dra_sharing', 'dra_kubelet_plugin', 'dra_computedomain'));"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_distribution_declares_no_driver_or_device_library() -> None:
    pyproject = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    for dist in ("dra-nvlib", "dra-sharing", "dra-kubelet-plugin", "dra-computedomain"):
        assert f'"{dist}"' not in pyproject
