"""Fixtures for the Helm chart tests: a pinned Helm (built on first use) and a renderer."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from chart_helpers import (
    BASE_SETS,
    CHART,
    NAMESPACE,
    HelmFailed,
    Render,
    helm_path,
    run_helm,
    set_args,
)


@pytest.fixture(scope="session")
def helm() -> Path:
    """The pinned Helm binary."""
    try:
        return helm_path()
    except HelmFailed as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def render(helm: Path) -> Render:
    """Renders the chart with ``--set`` values; returns the manifest objects in order."""

    def _render(
        sets: Mapping[str, str] | None = None,
        *,
        namespace: str = NAMESPACE,
        base: bool = True,
    ) -> list[dict[str, Any]]:
        values = {**(BASE_SETS if base else {}), **(sets or {})}
        args = ["template", "dra", str(CHART), "--namespace", namespace, *set_args(values)]
        out = run_helm(helm, *args)
        return [doc for doc in yaml.safe_load_all(out) if doc]

    return _render
