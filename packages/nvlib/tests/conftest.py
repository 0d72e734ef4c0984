"""Fixtures shared by the test modules: NVIDIA's mock NVML library, built on demand."""

from __future__ import annotations

import os
import subprocess

import pytest
from dra_nvlib.mock_nvml_build import MockNvml, MockNvmlUnavailable, build_mock_nvml


@pytest.fixture(scope="session")
def mock_nvml() -> MockNvml:
    """The mock NVML library. When it cannot be obtained the dependent tests are skipped with
    the reason, or fail when ``DRA_NVLIB_REQUIRE_MOCKNVML=1`` (set it in CI)."""
    try:
        return build_mock_nvml()
    except (MockNvmlUnavailable, OSError, subprocess.TimeoutExpired) as exc:
        if os.environ.get("DRA_NVLIB_REQUIRE_MOCKNVML") == "1":
            pytest.fail(f"mock libnvidia-ml.so unavailable: {exc}")
        pytest.skip(f"mock libnvidia-ml.so unavailable: {exc}")
