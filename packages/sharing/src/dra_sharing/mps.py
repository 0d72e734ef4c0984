"""MPS control daemons: one per prepared device group, started ready, stopped at unprepare.

Layout on the host, below the manager's root (the plugin's ``mps/`` directory)::

    <root>/<daemonID>/pipe   CUDA_MPS_PIPE_DIRECTORY (bind-mounted at /tmp/nvidia-mps)
    <root>/<daemonID>/log    CUDA_MPS_LOG_DIRECTORY
    <root>/<daemonID>/shm    the daemon's /dev/shm (a tmpfs on real nodes)
    <root>/<daemonID>/spec.json   what was started (so a restarted plugin can stop it)

The daemon ID is ``<claimUID>-<5 hex of sha256 of the sorted device UUIDs>``, NVIDIA's form,
so the same group always maps to the same directory and a restarted plugin finds it again.

Two launchers: :class:`NvidiaMpsLauncher` runs ``nvidia-cuda-mps-control -d`` from the
driver root and pipes the settings into it; :class:`FakeMpsLauncher` runs our own daemon
(:mod:`dra_sharing.fake_mps_daemon`), which honours the same pipe directory and publishes
the settings there for a client in the pod to read back. The manager sets compute mode
EXCLUSIVE_PROCESS on the group's GPUs before the daemon starts and back to DEFAULT after it
stops.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from dra_nvlib import ComputeMode, DeviceError, DeviceLib

from dra_sharing import fake_mps_daemon
from dra_sharing.errors import SharingApplyError
from dra_sharing.fake_mps_daemon import READY_FILE, SETTINGS_FILE, render_mps_control_client
from dra_sharing.resolve import MpsSettings

__all__ = [
    "CONTAINER_PIPE_DIR",
    "FakeMpsLauncher",
    "MpsDaemonManager",
    "MpsDaemonSpec",
    "MpsDirs",
    "MpsEdits",
    "MpsLauncher",
    "NvidiaMpsLauncher",
    "mps_daemon_id",
]

log = logging.getLogger(__name__)

#: Where containers find the pipe directory (NVIDIA's path).
CONTAINER_PIPE_DIR = "/tmp/nvidia-mps"
CONTAINER_SHM_DIR = "/dev/shm"
CONTAINER_CLIENT = "/usr/bin/nvidia-cuda-mps-control"
_SPEC_FILE = "spec.json"


def mps_daemon_id(claim_uid: str, device_uuids: Sequence[str]) -> str:
    """``<claimUID>-<first 5 hex of sha256(sorted UUIDs joined by ",")>``."""
    digest = hashlib.sha256(",".join(sorted(device_uuids)).encode()).hexdigest()
    return f"{claim_uid}-{digest[:5]}"


@dataclass(frozen=True)
class MpsDaemonSpec:
    """What to start: the daemon's ID, the GPUs whose compute mode it needs, the devices it
    serves (``CUDA_VISIBLE_DEVICES``) and its settings."""

    daemon_id: str
    gpu_uuids: tuple[str, ...]
    device_uuids: tuple[str, ...]
    settings: MpsSettings

    def to_json(self) -> dict[str, object]:
        """The spec as stored next to the daemon."""
        return {
            "id": self.daemon_id,
            "gpuUUIDs": list(self.gpu_uuids),
            "deviceUUIDs": list(self.device_uuids),
            "activeThreadPercentage": self.settings.active_thread_percentage,
            "pinnedMemoryLimits": dict(self.settings.pinned_memory_limits),
            "multiUser": self.settings.multi_user,
        }


@dataclass(frozen=True)
class MpsDirs:
    """The host directories of one daemon."""

    root: Path

    @property
    def pipe(self) -> Path:
        """CUDA_MPS_PIPE_DIRECTORY."""
        return self.root / "pipe"

    @property
    def log(self) -> Path:
        """CUDA_MPS_LOG_DIRECTORY."""
        return self.root / "log"

    @property
    def shm(self) -> Path:
        """The daemon's shared memory directory."""
        return self.root / "shm"

    @property
    def client(self) -> Path:
        """The fake ``nvidia-cuda-mps-control`` client script (fake launcher only)."""
        return self.root / "nvidia-cuda-mps-control"


@dataclass(frozen=True)
class MpsEdits:
    """What a container of the group needs: env and (host, container) bind mounts."""

    env: tuple[str, ...]
    mounts: tuple[tuple[str, str], ...]


class MpsLauncher(Protocol):
    """Starts and stops the daemon process of one group."""

    #: Whether containers get our fake ``nvidia-cuda-mps-control`` client.
    provides_client: bool

    def start(self, spec: MpsDaemonSpec, dirs: MpsDirs, *, timeout_s: float) -> None:
        """Start the daemon and return once it answers; raise SharingApplyError if not."""
        ...

    def stop(self, dirs: MpsDirs, *, timeout_s: float) -> None:
        """Stop the daemon (idempotent; a daemon that is gone is fine)."""
        ...


def _gpu_of(spec: MpsDaemonSpec) -> str:
    return ",".join(spec.gpu_uuids) or spec.daemon_id


class NvidiaMpsLauncher:
    """``nvidia-cuda-mps-control -d`` from the driver, with a tmpfs on the shm directory."""

    provides_client = False

    def __init__(self, control: Path, *, mount_shm: bool = True, shm_size: str = "65536k") -> None:
        """``control`` is the ``nvidia-cuda-mps-control`` binary (below the driver root)."""
        self._control = control
        self._mount_shm = mount_shm
        self._shm_size = shm_size

    def _env(self, spec: MpsDaemonSpec | None, dirs: MpsDirs) -> dict[str, str]:
        env = dict(os.environ)
        env["CUDA_MPS_PIPE_DIRECTORY"] = str(dirs.pipe)
        env["CUDA_MPS_LOG_DIRECTORY"] = str(dirs.log)
        if spec is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(spec.device_uuids)
        return env

    def _control_cmd(self, dirs: MpsDirs, command: str, *, timeout_s: float) -> str:
        proc = subprocess.run(
            [str(self._control)],
            input=command + "\n",
            env=self._env(None, dirs),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError((proc.stderr or proc.stdout).strip() or f"exit {proc.returncode}")
        return proc.stdout.strip()

    def start(self, spec: MpsDaemonSpec, dirs: MpsDirs, *, timeout_s: float) -> None:
        """Mount the shm tmpfs, start the daemon, send the settings, wait until it answers."""
        op = "start_mps_daemon"
        try:
            if self._mount_shm:
                subprocess.run(
                    [
                        "mount",
                        "-t",
                        "tmpfs",
                        "-o",
                        f"rw,nosuid,nodev,size={self._shm_size}",
                        "tmpfs",
                        str(dirs.shm),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                    check=True,
                )
            subprocess.run(
                [str(self._control), "-d", *(["-M"] if spec.settings.multi_user else [])],
                env=self._env(spec, dirs),
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=True,
            )
            commands = []
            pct = spec.settings.active_thread_percentage
            if pct is not None:
                commands.append(f"set_default_active_thread_percentage {pct}")
            for uuid, limit in sorted(spec.settings.pinned_memory_limits.items()):
                commands.append(f"set_default_device_pinned_mem_limit {uuid} {limit}")
            for command in commands:
                self._control_cmd(dirs, command, timeout_s=timeout_s)
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    self._control_cmd(dirs, "get_default_active_thread_percentage", timeout_s=5)
                    return
                except (RuntimeError, subprocess.TimeoutExpired):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        except FileNotFoundError as exc:
            raise SharingApplyError(gpu=_gpu_of(spec), operation=op, message=f"{exc}") from exc
        except subprocess.CalledProcessError as exc:
            detail = (exc.stderr or exc.stdout or "").strip()
            raise SharingApplyError(
                gpu=_gpu_of(spec), operation=op, message=f"{exc.cmd[0]} failed: {detail}"
            ) from exc
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            raise SharingApplyError(
                gpu=_gpu_of(spec), operation=op, message=f"daemon not ready: {exc}"
            ) from exc

    def stop(self, dirs: MpsDirs, *, timeout_s: float) -> None:
        """``quit`` to the daemon, then unmount the shm tmpfs."""
        if dirs.pipe.exists():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired, FileNotFoundError):
                self._control_cmd(dirs, "quit", timeout_s=timeout_s)
        if self._mount_shm and os.path.ismount(dirs.shm):
            subprocess.run(["umount", str(dirs.shm)], capture_output=True, check=False)


class FakeMpsLauncher:
    """Our own daemon process for the fake backend (same pipe directory, same settings)."""

    provides_client = True

    def __init__(self, python: str = sys.executable) -> None:
        """``python`` runs :mod:`dra_sharing.fake_mps_daemon`."""
        self._python = python

    def start(self, spec: MpsDaemonSpec, dirs: MpsDirs, *, timeout_s: float) -> None:
        """Spawn the daemon in its own session (it outlives a plugin crash, as the real one
        does) and wait for its ready marker."""
        argv = [
            self._python,
            # The file, not ``-m``: the daemon needs only the standard library, and running
            # it as a script skips importing this package (pydantic, NVML) at every start.
            str(Path(fake_mps_daemon.__file__)),
            "--pipe-dir",
            str(dirs.pipe),
            "--log-dir",
            str(dirs.log),
            "--devices",
            ",".join(spec.device_uuids),
        ]
        pct = spec.settings.active_thread_percentage
        if pct is not None:
            argv += ["--active-thread-percentage", str(pct)]
        for uuid, limit in sorted(spec.settings.pinned_memory_limits.items()):
            argv += ["--pinned-mem-limit", f"{uuid}={limit}"]
        if spec.settings.multi_user:
            argv.append("--multi-user")
        argv.append("--background")
        with open(dirs.log / "daemon.out", "ab") as out:
            code = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                timeout=timeout_s,
                check=False,
            ).returncode
        if code != 0:
            raise SharingApplyError(
                gpu=_gpu_of(spec),
                operation="start_mps_daemon",
                message=f"fake MPS daemon exited with {code}; see {dirs.log / 'daemon.out'}",
            )
        deadline = time.monotonic() + timeout_s
        while not (dirs.pipe / READY_FILE).exists():
            if time.monotonic() > deadline:
                self.stop(dirs, timeout_s=timeout_s)
                raise SharingApplyError(
                    gpu=_gpu_of(spec),
                    operation="start_mps_daemon",
                    message=f"fake MPS daemon not ready after {timeout_s:.0f}s",
                )
            time.sleep(0.01)

    def stop(self, dirs: MpsDirs, *, timeout_s: float) -> None:
        """SIGTERM the daemon named by its pid file, SIGKILL if it lingers."""
        pid = _read_pid(dirs.pipe / "nvidia-mps.pid")
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _alive(pid):
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.01)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    # Reap it where we are its parent or subreaper (the plugin as PID 1 of its container),
    # so a stopped daemon does not linger as a zombie that signal 0 still finds.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # An exited daemon waiting for its new parent (init) to reap it has stopped too.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


class MpsDaemonManager:
    """Starts, stops and finds again the MPS daemons of this node."""

    def __init__(
        self, root: Path, *, lib: DeviceLib, launcher: MpsLauncher, timeout_s: float = 30.0
    ) -> None:
        """Daemons live below ``root``; ``lib`` sets the GPUs' compute mode."""
        self._root = root
        self._lib = lib
        self._launcher = launcher
        self._timeout = timeout_s

    def dirs(self, daemon_id: str) -> MpsDirs:
        """The directories of a daemon."""
        return MpsDirs(self._root / daemon_id)

    def start(self, spec: MpsDaemonSpec) -> MpsDirs:
        """Set EXCLUSIVE_PROCESS, start the daemon and return once it is ready.

        A daemon of the same ID already running (a retried prepare) is stopped first, so the
        settings are always the requested ones. On any failure everything done here is
        undone before the error is raised.

        Raises:
            SharingApplyError: compute mode or daemon start failed (names GPU and reason).
        """
        dirs = self.dirs(spec.daemon_id)
        if dirs.root.exists():
            self.stop(spec.daemon_id, spec.gpu_uuids)
        for d in (dirs.pipe, dirs.log, dirs.shm):
            d.mkdir(parents=True, exist_ok=True)
        (dirs.root / _SPEC_FILE).write_text(json.dumps(spec.to_json(), sort_keys=True))
        if self._launcher.provides_client:
            dirs.client.write_text(render_mps_control_client())
            dirs.client.chmod(0o755)
        try:
            for gpu in spec.gpu_uuids:
                self._set_mode(gpu, ComputeMode.EXCLUSIVE_PROCESS)
            self._launcher.start(spec, dirs, timeout_s=self._timeout)
        except BaseException:
            self.stop(spec.daemon_id, spec.gpu_uuids)
            raise
        log.info(
            "MPS control daemon ready",
            extra={
                "event": "mps_daemon_started",
                "daemon_id": spec.daemon_id,
                "devices": list(spec.device_uuids),
            },
        )
        return dirs

    def stop(self, daemon_id: str, gpu_uuids: Sequence[str] | None = None) -> None:
        """Stop the daemon, reset its GPUs to compute mode DEFAULT, remove its directories.

        ``gpu_uuids`` default to the ones recorded when it was started. Idempotent.

        Raises:
            SharingApplyError: the compute mode could not be reset (the directories stay, so
                a retry finds the daemon again).
        """
        dirs = self.dirs(daemon_id)
        if gpu_uuids is None:
            gpu_uuids = self._recorded_gpus(dirs)
        self._launcher.stop(dirs, timeout_s=self._timeout)
        for gpu in gpu_uuids:
            self._set_mode(gpu, ComputeMode.DEFAULT)
        shutil.rmtree(dirs.root, ignore_errors=True)
        log.info(
            "MPS control daemon stopped",
            extra={"event": "mps_daemon_stopped", "daemon_id": daemon_id},
        )

    def known(self) -> set[str]:
        """IDs of daemons with directories on disk (running or left by a crash)."""
        try:
            return {p.name for p in self._root.iterdir() if p.is_dir()}
        except FileNotFoundError:
            return set()

    def stop_unknown(self, keep: set[str]) -> list[str]:
        """Stop every daemon on disk whose ID is not in ``keep`` (recovery).

        Raises:
            SharingApplyError: the first daemon that could not be stopped (the others were
                still tried).
        """
        stopped = []
        first: SharingApplyError | None = None
        for daemon_id in sorted(self.known() - keep):
            try:
                self.stop(daemon_id)
            except SharingApplyError as exc:
                first = first or exc
                continue
            stopped.append(daemon_id)
        if first is not None:
            raise first
        return stopped

    def edits(self, daemon_id: str) -> MpsEdits:
        """Env and mounts for the containers of the daemon's group (NVIDIA's paths)."""
        dirs = self.dirs(daemon_id)
        mounts = [(str(dirs.pipe), CONTAINER_PIPE_DIR), (str(dirs.shm), CONTAINER_SHM_DIR)]
        if self._launcher.provides_client:
            mounts.append((str(dirs.client), CONTAINER_CLIENT))
        return MpsEdits(
            env=(f"CUDA_MPS_PIPE_DIRECTORY={CONTAINER_PIPE_DIR}",), mounts=tuple(mounts)
        )

    def _recorded_gpus(self, dirs: MpsDirs) -> tuple[str, ...]:
        try:
            doc = json.loads((dirs.root / _SPEC_FILE).read_text())
            return tuple(str(u) for u in doc.get("gpuUUIDs", []))
        except (OSError, ValueError, AttributeError):
            return ()

    def _set_mode(self, gpu: str, mode: ComputeMode) -> None:
        try:
            self._lib.set_compute_mode(gpu, mode)
        except DeviceError as exc:
            raise SharingApplyError(
                gpu=gpu, operation=f"set compute mode {mode.name}", message=str(exc)
            ) from exc


def settings_path(dirs: MpsDirs) -> Path:
    """Where the fake daemon publishes its settings (read by the fake client)."""
    return dirs.pipe / SETTINGS_FILE
