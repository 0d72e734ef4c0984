"""MPS control daemons: the fake daemon end to end, the NVIDIA launcher against a stand-in
``nvidia-cuda-mps-control``, and recovery after a crash."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from dra_nvlib import ComputeMode, FakeDeviceLib, FaultKind
from dra_sharing import (
    CONTAINER_PIPE_DIR,
    FakeMpsLauncher,
    MpsDaemonManager,
    MpsDaemonSpec,
    MpsSettings,
    NvidiaMpsLauncher,
    SharingApplyError,
    mps_daemon_id,
)
from dra_sharing.fake_mps_daemon import READY_FILE, render_mps_control_client
from dra_sharing.mps_launchers import _alive


def _spec(lib: FakeDeviceLib, pct: int | None = 40) -> MpsDaemonSpec:
    gpu = lib.gpus()[0].uuid
    return MpsDaemonSpec(
        daemon_id=mps_daemon_id("uid-1", [gpu]),
        gpu_uuids=(gpu,),
        device_uuids=(gpu,),
        settings=MpsSettings(active_thread_percentage=pct, pinned_memory_limits={gpu: "2048M"}),
    )


def _client(dirs_pipe: Path, client: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", str(client)],
        input=command + "\n",
        capture_output=True,
        text=True,
        env={"CUDA_MPS_PIPE_DIRECTORY": str(dirs_pipe), "PATH": "/nonexistent"},
        check=False,
    )


def test_daemon_id_is_nvidias_form() -> None:
    one = mps_daemon_id("uid", ["GPU-b", "GPU-a"])
    assert one == mps_daemon_id("uid", ["GPU-a", "GPU-b"])
    assert one.startswith("uid-")
    assert len(one) == len("uid-") + 5


def test_fake_daemon_ready_settings_readable_and_stopped(
    lib: FakeDeviceLib, tmp_path: Path
) -> None:
    manager = MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=FakeMpsLauncher())
    spec = _spec(lib)
    dirs = manager.start(spec)
    gpu = spec.gpu_uuids[0]
    assert (dirs.pipe / READY_FILE).exists()
    assert lib.gpu(gpu).compute_mode is ComputeMode.EXCLUSIVE_PROCESS
    pid = int((dirs.pipe / "nvidia-mps.pid").read_text())
    os.kill(pid, 0)  # running
    # What a client in the pod reads back through the pipe directory.
    assert _client(dirs.pipe, dirs.client, "get_default_active_thread_percentage").stdout == (
        "40.0\n"
    )
    limit = _client(dirs.pipe, dirs.client, f"get_default_device_pinned_mem_limit {gpu}")
    assert limit.stdout == "2048M\n"
    assert _client(dirs.pipe, dirs.client, "get_server_list").stdout == f"{pid}\n"
    edits = manager.edits(spec.daemon_id)
    assert edits.env == (f"CUDA_MPS_PIPE_DIRECTORY={CONTAINER_PIPE_DIR}",)
    assert (str(dirs.pipe), CONTAINER_PIPE_DIR) in edits.mounts
    assert (str(dirs.shm), "/dev/shm") in edits.mounts
    assert (str(dirs.client), "/usr/bin/nvidia-cuda-mps-control") in edits.mounts

    manager.stop(spec.daemon_id)
    assert not dirs.root.exists()
    assert lib.gpu(gpu).compute_mode is ComputeMode.DEFAULT
    assert not _alive(pid)


def test_default_thread_percentage_is_100(lib: FakeDeviceLib, tmp_path: Path) -> None:
    manager = MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=FakeMpsLauncher())
    dirs = manager.start(_spec(lib, pct=None))
    try:
        out = _client(dirs.pipe, dirs.client, "get_default_active_thread_percentage")
        assert out.stdout == "100.0\n"
    finally:
        manager.stop(_spec(lib).daemon_id)


def test_client_without_daemon_fails_like_the_real_one(tmp_path: Path) -> None:
    client = tmp_path / "nvidia-cuda-mps-control"
    client.write_text(render_mps_control_client())
    out = _client(tmp_path, client, "get_server_list")
    assert out.returncode == 1
    assert "Cannot find MPS control daemon" in out.stderr


def test_daemons_left_by_a_crash_are_found_and_stopped(lib: FakeDeviceLib, tmp_path: Path) -> None:
    spec = _spec(lib)
    dirs = MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=FakeMpsLauncher()).start(spec)
    pid = int((dirs.pipe / "nvidia-mps.pid").read_text())
    # A new plugin process: only the directories remain as the record.
    restarted = MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=FakeMpsLauncher())
    assert restarted.known() == {spec.daemon_id}
    assert restarted.stop_unknown(keep=set()) == [spec.daemon_id]
    assert not _alive(pid)
    assert lib.gpu(spec.gpu_uuids[0]).compute_mode is ComputeMode.DEFAULT


def test_half_started_daemon_dir_is_cleaned(lib: FakeDeviceLib, tmp_path: Path) -> None:
    # A SIGKILL while the daemon starts leaves a directory without a running daemon.
    spec = _spec(lib)
    root = tmp_path / "mps" / spec.daemon_id
    (root / "pipe").mkdir(parents=True)
    (root / "spec.json").write_text(f'{{"gpuUUIDs": ["{spec.gpu_uuids[0]}"]}}')
    lib.set_compute_mode(spec.gpu_uuids[0], ComputeMode.EXCLUSIVE_PROCESS)
    manager = MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=FakeMpsLauncher())
    assert manager.stop_unknown(keep=set()) == [spec.daemon_id]
    assert not root.exists()
    assert lib.gpu(spec.gpu_uuids[0]).compute_mode is ComputeMode.DEFAULT


def test_compute_mode_failure_undoes_everything(lib: FakeDeviceLib, tmp_path: Path) -> None:
    spec = _spec(lib)
    lib.fail_next("set_compute_mode", error=FaultKind.NO_PERMISSION)
    manager = MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=FakeMpsLauncher())
    with pytest.raises(SharingApplyError) as info:
        manager.start(spec)
    assert info.value.gpu == spec.gpu_uuids[0]
    assert manager.known() == set()


_STAND_IN = """#!/bin/sh
# Stand-in for nvidia-cuda-mps-control: records argv, env and stdin, answers queries.
log="$STANDIN_LOG"
if [ "$1" = "-d" ]; then
  echo "start pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY" \
    "dev=$CUDA_VISIBLE_DEVICES${2:+ flag=$2}" >> "$log"
  touch "$CUDA_MPS_PIPE_DIRECTORY/control"
  exit 0
fi
[ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ] || { echo "Cannot find MPS control daemon" >&2; exit 1; }
while read -r line; do
  echo "cmd $line" >> "$log"
  case "$line" in
    get_default_active_thread_percentage) echo 100.0 ;;
    quit) rm -f "$CUDA_MPS_PIPE_DIRECTORY/control" ;;
  esac
done
"""


def test_nvidia_launcher_runs_control_daemon_and_pipes_settings(
    lib: FakeDeviceLib, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    control = tmp_path / "nvidia-cuda-mps-control"
    control.write_text(_STAND_IN)
    control.chmod(0o755)
    log = tmp_path / "standin.log"
    monkeypatch.setenv("STANDIN_LOG", str(log))
    launcher = NvidiaMpsLauncher(control, mount_shm=False)
    manager = MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=launcher)
    spec = _spec(lib)
    dirs = manager.start(spec)
    gpu = spec.gpu_uuids[0]
    lines = log.read_text().splitlines()
    # Single-user by default: no -M.
    assert lines[0] == f"start pipe={dirs.pipe} log={dirs.log} dev={gpu}"
    assert "cmd set_default_active_thread_percentage 40" in lines
    assert f"cmd set_default_device_pinned_mem_limit {gpu} 2048M" in lines
    assert "cmd get_default_active_thread_percentage" in lines
    # The real daemon brings its own client; containers get only the pipe dir and shm.
    assert len(manager.edits(spec.daemon_id).mounts) == 2
    manager.stop(spec.daemon_id)
    assert "cmd quit" in log.read_text().splitlines()
    assert lib.gpu(gpu).compute_mode is ComputeMode.DEFAULT


@pytest.mark.parametrize("launch", ["nvidia", "fake"])
def test_multi_user_mps_starts_the_daemon_with_dash_m(
    lib: FakeDeviceLib, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launch: str
) -> None:
    # NVIDIA's mpsConfig.multiUser: nvidia-cuda-mps-control -d -M.
    control = tmp_path / "nvidia-cuda-mps-control"
    control.write_text(_STAND_IN)
    control.chmod(0o755)
    log = tmp_path / "standin.log"
    monkeypatch.setenv("STANDIN_LOG", str(log))
    launcher = (
        NvidiaMpsLauncher(control, mount_shm=False) if launch == "nvidia" else FakeMpsLauncher()
    )
    manager = MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=launcher)
    base = _spec(lib)
    spec = MpsDaemonSpec(
        daemon_id=base.daemon_id,
        gpu_uuids=base.gpu_uuids,
        device_uuids=base.device_uuids,
        settings=MpsSettings(multi_user=True),
    )
    assert spec.to_json()["multiUser"] is True
    dirs = manager.start(spec)
    try:
        if launch == "nvidia":
            assert log.read_text().splitlines()[0].endswith(" flag=-M")
        else:
            assert "starting multi-user control daemon" in (dirs.log / "control.log").read_text()
    finally:
        manager.stop(spec.daemon_id)


def test_nvidia_launcher_missing_binary_is_a_per_claim_error(
    lib: FakeDeviceLib, tmp_path: Path
) -> None:
    launcher = NvidiaMpsLauncher(tmp_path / "absent", mount_shm=False)
    manager = MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=launcher)
    with pytest.raises(SharingApplyError, match="start_mps_daemon"):
        manager.start(_spec(lib))
    assert manager.known() == set()
    assert lib.gpu(lib.gpus()[0].uuid).compute_mode is ComputeMode.DEFAULT


def test_fake_daemon_exits_on_sigterm(tmp_path: Path) -> None:
    import sys
    import time

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dra_sharing.fake_mps_daemon",
            "--pipe-dir",
            str(tmp_path / "p"),
            "--log-dir",
            str(tmp_path / "l"),
            "--devices",
            "GPU-x",
        ],
    )
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "p" / READY_FILE).exists():
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert not (tmp_path / "p" / READY_FILE).exists()
    assert "exiting" in (tmp_path / "l" / "control.log").read_text()
