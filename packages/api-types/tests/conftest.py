"""Shared fixtures: paths of the checked-in manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
NVIDIA_DEMO_SPECS = FIXTURES / "nvidia-demo-specs"
SEED = FIXTURES / "seed"


@pytest.fixture
def fixtures_dir() -> Path:
    """The directory of the checked-in test manifests."""
    return FIXTURES
