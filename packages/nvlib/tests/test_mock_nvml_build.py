"""The mock NVML build: cache key, symbol list, system selection (the library itself runs in
test_contract.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dra_nvlib.mock_nvml_build import (
    MIG_LAYOUT_ENV,
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
    assert mock.env("dgxa100", mig_layout="0:0@0") == {
        SYSTEM_ENV: "dgxa100",
        MIG_LAYOUT_ENV: "0:0@0",
    }
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


_LIST_MIG = (
    "import sys\n"
    "from pathlib import Path\n"
    "from dra_nvlib import DeviceLibConfig, LibraryLoadError, open_device_lib\n"
    "config = DeviceLibConfig(backend='nvml', nvml_library=Path(sys.argv[1]))\n"
    "try:\n"
    "    with open_device_lib(config) as lib:\n"
    "        for gpu in lib.gpus():\n"
    "            for mig in gpu.mig_devices:\n"
    "                print(gpu.minor, mig.gi_id, mig.ci_id, mig.profile_name)\n"
    "except LibraryLoadError as exc:\n"
    "    print('refused:', exc)\n"
)


def _list_mig(mock: MockNvml, layout: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _LIST_MIG, str(mock.library)],
        env={**mock.env("dgxa100", mig_layout=layout), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_mig_layout_makes_mig_devices_before_the_first_init(mock_nvml: MockNvml) -> None:
    proc = _list_mig(mock_nvml, "0:0@0,0:1@2,1:4@0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["0 0 0 1g.5gb", "0 1 0 2g.10gb", "1 0 0 7g.40gb"]


def test_bad_mig_layout_fails_the_init_naming_it(mock_nvml: MockNvml) -> None:
    proc = _list_mig(mock_nvml, "0:99@0")
    assert proc.stdout.startswith("refused:"), proc.stdout + proc.stderr
    assert f"{MIG_LAYOUT_ENV}: GPU 0 has no GPU instance profile 99" in proc.stderr
