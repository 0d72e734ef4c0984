"""Fixtures every chart test module shares."""

from __future__ import annotations

from pathlib import Path

import pytest
from chart_helpers import HelmFailed, helm_path


@pytest.fixture(scope="session")
def helm() -> Path:
    """The pinned Helm binary (built from the Go module proxy on first use)."""
    try:
        return helm_path()
    except HelmFailed as exc:
        pytest.fail(str(exc))
