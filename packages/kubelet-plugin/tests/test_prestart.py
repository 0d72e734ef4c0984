"""The init check of the driver root: found, waited for, and a wrong nvidiaDriverRoot explained."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dra_kubelet_plugin.backend import with_nvml_library
from dra_kubelet_plugin.driver_files import nvml_library_at
from dra_kubelet_plugin.prestart import diagnose, main
from dra_nvlib import DeviceLibConfig
from ld_cache_support import ld_cache


def _driver(root: Path, libdir: str = "usr/lib/x86_64-linux-gnu") -> Path:
    lib = root / libdir / "libnvidia-ml.so.1"
    lib.parent.mkdir(parents=True, exist_ok=True)
    lib.write_bytes(b"\x7fELF stand-in")
    return lib


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """main() configures process-wide logging; give pytest its handlers back."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def _lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


@pytest.mark.parametrize("libdir", ["usr/lib64", "usr/lib/x86_64-linux-gnu", "lib64"])
def test_finds_the_library_and_reports_its_host_path(tmp_path: Path, libdir: str) -> None:
    _driver(tmp_path, libdir)
    found = diagnose(tmp_path, "/run/nvidia/driver")
    assert found.library == f"/run/nvidia/driver/{libdir}/libnvidia-ml.so.1"
    assert found.hint == ""


def test_a_host_root_of_slash_names_the_gpu_operators_root(tmp_path: Path) -> None:
    _driver(tmp_path / "run/nvidia/driver")
    found = diagnose(tmp_path, "/")
    assert found.library is None
    assert "nvidiaDriverRoot '/'" in found.message
    assert "set nvidiaDriverRoot=/run/nvidia/driver" in found.hint
    assert "GPU Operator" in found.hint


def test_a_host_root_of_slash_names_gkes_root(tmp_path: Path) -> None:
    _driver(tmp_path / "home/kubernetes/bin/nvidia", "lib64")
    assert "set nvidiaDriverRoot=/home/kubernetes/bin/nvidia" in diagnose(tmp_path, "/").hint


def test_the_gpu_operators_root_is_waited_for(tmp_path: Path) -> None:
    found = diagnose(tmp_path, "/run/nvidia/driver")
    assert found.library is None
    assert "waiting for the GPU Operator's driver container" in found.hint


def test_another_empty_root_says_what_to_set(tmp_path: Path) -> None:
    hint = diagnose(tmp_path, "/opt/nvidia").hint
    assert "set nvidiaDriverRoot to where the driver is installed" in hint


@pytest.mark.usefixtures("restore_logging")
def test_main_waits_until_the_driver_appears(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 2:  # the driver container finishes during the second wait
            _driver(tmp_path)

    argv = ["--nvidia-driver-root=/run/nvidia/driver", f"--container-driver-root={tmp_path}"]
    assert main([*argv, "--interval=5"], sleep=sleep) == 0
    assert sleeps == [5.0, 5.0]
    lines = _lines(capsys)
    assert [line["event"] for line in lines] == ["driver_missing"] * 2 + ["driver_found"]
    assert lines[-1]["library"] == "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
    assert "waiting for the GPU Operator" in lines[0]["msg"]


@pytest.mark.usefixtures("restore_logging")
def test_main_gives_up_after_its_timeout_with_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _driver(tmp_path / "run/nvidia/driver")
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    argv = ["--nvidia-driver-root=/", f"--container-driver-root={tmp_path}", "--timeout=25"]
    assert main(argv, sleep=sleep, clock=lambda: now[0]) == 1
    lines = _lines(capsys)
    assert len(lines) == 4  # at 0, 10, 20 and 30 s
    assert all("set nvidiaDriverRoot=/run/nvidia/driver" in line["hint"] for line in lines)


def _gke_style_root(
    root: Path, cache_path: str = "/usr/local/nvidia/lib64/libnvidia-ml.so.1"
) -> None:
    """A driver in /usr/local/nvidia/lib64, found only through the root's ld.so.cache (as on the
    H200 host the gpu-check ran on)."""
    _driver(root, "usr/local/nvidia/lib64")
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc/ld.so.cache").write_bytes(ld_cache([("libnvidia-ml.so.1", cache_path)]))


def test_a_driver_registered_with_ldconfig_is_found_through_the_cache(tmp_path: Path) -> None:
    _gke_style_root(tmp_path)
    found = diagnose(tmp_path, "/")
    assert found.library == "/usr/local/nvidia/lib64/libnvidia-ml.so.1"
    assert found.message == "NVIDIA driver found"
    assert nvml_library_at(tmp_path) == tmp_path / "usr/local/nvidia/lib64/libnvidia-ml.so.1"


def test_a_cache_naming_a_missing_library_finds_nothing(tmp_path: Path) -> None:
    _gke_style_root(tmp_path, cache_path="/opt/gone/libnvidia-ml.so.1")
    assert nvml_library_at(tmp_path) is None
    assert diagnose(tmp_path, "/").library is None


def test_the_toolkits_directories_come_before_the_cache(tmp_path: Path) -> None:
    _gke_style_root(tmp_path)
    first = _driver(tmp_path, "usr/lib64")
    assert nvml_library_at(tmp_path) == first


def test_the_nvml_backend_loads_the_library_the_cache_names(tmp_path: Path) -> None:
    _gke_style_root(tmp_path)
    config = with_nvml_library(DeviceLibConfig(backend="nvml", driver_root=tmp_path))
    assert config.nvml_library == tmp_path / "usr/local/nvidia/lib64/libnvidia-ml.so.1"
    given = DeviceLibConfig(driver_root=tmp_path, nvml_library=Path("/x/libnvidia-ml.so.1"))
    assert with_nvml_library(given) == given
    fake = DeviceLibConfig(backend="fake", driver_root=tmp_path, node_name="n1", fake_fleet="1xL4")
    assert with_nvml_library(fake) == fake
    empty = DeviceLibConfig(driver_root=tmp_path / "empty")
    assert with_nvml_library(empty).nvml_library is None
