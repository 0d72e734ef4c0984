"""The mock NVML build: cache key, symbol list, system selection (the library itself runs in
test_contract.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dra_nvlib.mock_nvml_build import (
    MOCK_SYSTEMS,
    SOURCE_DIR,
    SYSTEM_ENV,
    MockNvml,
    cache_key,
    go_nvml_version,
    undefined_nvml_symbols,
)


def test_version_comes_from_the_pinned_go_mod() -> None:
    assert go_nvml_version().startswith("v0.")


def test_cache_key_covers_the_sources(tmp_path: Path) -> None:
    copy = tmp_path / "src"
    shutil.copytree(SOURCE_DIR, copy)
    key = cache_key(copy)
    assert key == cache_key(SOURCE_DIR)
    assert key.startswith(f"nvml-gomock-{go_nvml_version()}-")
    (copy / "gaps.go").write_text((copy / "gaps.go").read_text() + "\n// changed\n")
    assert cache_key(copy) != key


def test_undefined_symbols_are_the_nvml_ones() -> None:
    nm = (
        "                 U nvmlDeviceGetRowRemapperHistogram\n"
        "                 U nvmlDeviceGetAddressingMode\n"
        "                 U pthread_create\n"
        "                 w __gmon_start__\n"
        "                 U nvmlDeviceGetAddressingMode\n"
    )
    assert undefined_nvml_symbols(nm) == [
        "nvmlDeviceGetAddressingMode",
        "nvmlDeviceGetRowRemapperHistogram",
    ]


def test_env_selects_a_known_system_only() -> None:
    mock = MockNvml(Path("/nonexistent/libnvidia-ml.so.1"))
    assert mock.systems == MOCK_SYSTEMS
    assert mock.env("dgxh100") == {SYSTEM_ENV: "dgxh100"}
    with pytest.raises(ValueError, match="dgxz900"):
        mock.env("dgxz900")


def test_library_refuses_an_unknown_system(mock_nvml: MockNvml, tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from dra_nvlib import DeviceLibConfig, LibraryLoadError, open_device_lib\n"
        "try:\n"
        f"    library = Path({str(mock_nvml.library)!r})\n"
        "    open_device_lib(DeviceLibConfig(backend='nvml', nvml_library=library))\n"
        "except LibraryLoadError as exc:\n"
        "    print('refused:', exc)\n"
        "    sys.exit(0)\n"
        "sys.exit(1)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env={SYSTEM_ENV: "dgxz900", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "refused:" in proc.stdout
    assert f'{SYSTEM_ENV}="dgxz900" is not a go-nvml mock system' in proc.stderr
    assert "dgxa100, dgxb200, dgxh100, dgxh200" in proc.stderr
