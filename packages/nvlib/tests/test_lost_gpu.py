"""A GPU lost to Xid 79 costs that GPU only, on both backends: enumeration lists the others,
a watch of the lost GPU reports it once and then fails at once (no spinning), and watches of
the other GPUs go on. The fake backend behaves as NVML does here, so the plugin's tests see
what a real node shows."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from dra_nvlib import (
    DeviceLibConfig,
    FakeDeviceLib,
    FaultKind,
    GpuLostError,
    HealthEventKind,
    NvmlCallError,
    open_device_lib,
)
from dra_nvlib.nvml_backend import NvmlDeviceLib
from test_nvml_backend import FakeGpu, FakeNvml


def _open(path: Path) -> FakeDeviceLib:
    lib = open_device_lib(
        DeviceLibConfig(
            backend="fake", node_name="node-a", fake_fleet="4xA100-40GB", fake_state_path=path
        )
    )
    assert isinstance(lib, FakeDeviceLib)
    return lib


def _lost_events(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [
        getattr(r, "index", -1)
        for r in caplog.records
        if getattr(r, "event", None) == "gpu_lost_unidentified"
    ]


def test_fake_gpu_lost_before_start_is_left_out_and_the_others_listed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "s.json"
    running = _open(state)
    uuids = [g.uuid for g in running.gpus()]
    # Lost from outside, as `dra-nvlib lose-gpu` does before the plugin starts.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "dra_nvlib",
            "--backend",
            "fake",
            "--node",
            "node-a",
            "--state",
            str(state),
            "lose-gpu",
            uuids[1],
        ],
        check=True,
    )
    with caplog.at_level(logging.WARNING, logger="dra_nvlib.devicelib"):
        fresh = _open(state).gpus()
    assert [g.uuid for g in fresh] == [uuids[0], uuids[2], uuids[3]]
    assert not any(g.lost for g in fresh)
    assert _lost_events(caplog) == [1]
    # A process that saw the GPU healthy keeps listing it, flagged, as NVML's last facts.
    seen = running.gpus()
    assert [g.uuid for g in seen] == uuids
    assert [g.lost for g in seen] == [False, True, False, False]


def test_fake_watch_of_a_lost_gpu_is_refused_and_others_are_watched(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json")
    uuids = [g.uuid for g in lib.gpus()]
    lib.mark_gpu_lost(uuids[0])
    with pytest.raises(GpuLostError) as err:
        lib.watch_health([uuids[0]])
    assert (err.value.gpu, err.value.operation) == (uuids[0], "watch_health")
    with pytest.raises(GpuLostError):
        lib.watch_health()  # all GPUs: the lost one fails the registration, as in NVML
    with lib.watch_health([uuids[1]]) as other:
        lib.inject_xid(uuids[1], 79)
        event = other.wait(5.0)
    assert event is not None
    assert (event.kind, event.xid) == (HealthEventKind.XID, 79)


def test_fake_wait_reports_the_loss_once_then_fails_at_once(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json")
    uuid = lib.gpus()[2].uuid
    with lib.watch_health([uuid]) as watch:
        lib.mark_gpu_lost(uuid)
        event = watch.wait(5.0)
        assert event is not None
        assert (event.kind, event.gpu_uuid) == (HealthEventKind.GPU_LOST, uuid)
        # GPU_IS_LOST at once on every later wait: an error, never a silent timeout.
        for _ in range(3):
            with pytest.raises(GpuLostError):
                watch.wait(600.0)


def test_fake_watch_fault_hits_only_the_named_gpu(tmp_path: Path) -> None:
    lib = _open(tmp_path / "s.json")
    uuids = [g.uuid for g in lib.gpus()]
    lib.fail_next("watch_health", gpu_uuid=uuids[1], error=FaultKind.UNKNOWN)
    lib.watch_health([uuids[0]]).close()
    with pytest.raises(NvmlCallError):
        lib.watch_health([uuids[1]])
    lib.watch_health([uuids[1]]).close()  # the fault is consumed


def _nvml_lib(nvml: FakeNvml, tmp_path: Path) -> NvmlDeviceLib:
    return NvmlDeviceLib(nvml, sysfs_root=tmp_path / "sys", nvidia_smi=tmp_path / "nvidia-smi")


def test_nvml_gpu_lost_before_start_is_left_out(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    nvml = FakeNvml(
        [
            FakeGpu("GPU-11111111-1111-1111-1111-111111111111", "00000000:07:00.0", lost=True),
            FakeGpu("GPU-22222222-2222-2222-2222-222222222222", "00000000:0F:00.0"),
        ]
    )
    with caplog.at_level(logging.WARNING, logger="dra_nvlib.devicelib"):
        gpus = _nvml_lib(nvml, tmp_path).gpus()
    assert [g.uuid for g in gpus] == ["GPU-22222222-2222-2222-2222-222222222222"]
    assert _lost_events(caplog) == [0]


def test_nvml_watch_fails_at_once_after_reporting_the_loss(tmp_path: Path) -> None:
    nvml = FakeNvml([FakeGpu("GPU-11111111-1111-1111-1111-111111111111", "00000000:07:00.0")])
    lib = _nvml_lib(nvml, tmp_path)
    with lib.watch_health() as watch:
        nvml.gpus[0].lost = True
        event = watch.wait(0.01)
        assert event is not None
        assert event.kind is HealthEventKind.GPU_LOST
        with pytest.raises(GpuLostError) as err:
            watch.wait(0.01)
    assert err.value.gpu == nvml.gpus[0].uuid
