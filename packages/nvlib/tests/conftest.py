"""Fixtures shared by the test modules: the mock NVML library over NVIDIA's go-nvml mock
systems and our own C stand-in, each built on demand."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from dra_nvlib.mock_nvml_build import MockNvml, MockNvmlUnavailable, build_mock_nvml


@pytest.fixture(scope="session")
def mock_nvml() -> MockNvml:
    """The go-nvml mock library (tests/nvml_gomock). Without Go or a C compiler the dependent
    tests are skipped with the reason, or fail when ``DRA_NVLIB_REQUIRE_MOCKNVML=1`` (CI);
    a failing build always fails them."""
    try:
        return build_mock_nvml()
    except MockNvmlUnavailable as exc:
        if os.environ.get("DRA_NVLIB_REQUIRE_MOCKNVML") == "1":
            pytest.fail(f"mock libnvidia-ml.so unavailable: {exc}")
        pytest.skip(f"mock libnvidia-ml.so unavailable: {exc}")


@pytest.fixture(scope="session")
def nvml_stub_driver_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A driver root holding ``usr/lib64/libnvidia-ml.so.1`` built from tests/nvml_stub."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build tests/nvml_stub/nvml_stub.c")
    root = tmp_path_factory.mktemp("driver-root")
    lib_dir = root / "usr" / "lib64"
    lib_dir.mkdir(parents=True)
    source = Path(__file__).parent / "nvml_stub" / "nvml_stub.c"
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-O1",
            "-Wall",
            "-Werror",
            "-o",
            str(lib_dir / "libnvidia-ml.so.1"),
            str(source),
        ],
        check=True,
    )
    return root
