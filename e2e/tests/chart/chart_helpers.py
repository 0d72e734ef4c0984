"""Shared helpers of the chart and driver tests: the pinned Helm and the chart's paths.

Imported by name (``import chart_helpers``): the test modules put this directory on
``sys.path``, since ``--import-mode=importlib`` gives them no package to import from. (No
conftest.py here: mypy over all of e2e/tests would see two modules named ``conftest``.)
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
CHART = REPO / "deployments" / "helm" / "dra-driver-nvidia-gpu"
HELM_WRAPPER = REPO / "deployments" / "tools" / "helm"

# The values every install of this chart needs; the guards refuse the rest.
BASE_SETS: dict[str, str] = {"gpuResourcesEnabledOverride": "true"}
NAMESPACE = "dra-driver-nvidia-gpu"

Render = Callable[..., list[dict[str, Any]]]


class HelmFailed(Exception):
    """helm exited non-zero; the message is its stderr."""


def helm_path() -> Path:
    """The pinned Helm binary (deployments/tools/helm builds it from the Go proxy if missing)."""
    out = subprocess.run(
        [str(HELM_WRAPPER), "--print-path"],
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )
    if out.returncode != 0:
        raise HelmFailed(f"could not get Helm: {out.stderr}")
    return Path(out.stdout.strip().splitlines()[-1])


def run_helm(helm: Path, *args: str, env: Mapping[str, str] | None = None) -> str:
    """Runs helm, returning stdout; raises HelmFailed with stderr on failure."""
    proc = subprocess.run([str(helm), *args], capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise HelmFailed(proc.stderr.strip())
    return proc.stdout


def set_args(sets: Mapping[str, str]) -> list[str]:
    """``--set k=v`` arguments (strings typed as YAML, as helm does)."""
    args: list[str] = []
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    return args
