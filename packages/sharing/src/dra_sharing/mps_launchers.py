"""Launchers of MPS control daemons: how the daemon process of one group is started, stopped
and told alive (see :class:`MpsLauncher`).

:class:`NvidiaMpsLauncher` runs ``nvidia-cuda-mps-control -d`` from the driver root and pipes
the settings into it; :class:`FakeMpsLauncher` runs our own daemon
(:mod:`dra_sharing.fake_mps_daemon`). Both start the daemon as a process of the caller's
container; the kubelet plugin runs that process in a Deployment of its own instead
(``dra_kubelet_plugin.mps_deployment``), which is what lets a daemon outlive the plugin.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from dra_sharing import fake_mps_daemon
from dra_sharing.errors import SharingApplyError
from dra_sharing.fake_mps_daemon import READY_FILE, query
from dra_sharing.mps_spec import MpsDaemonSpec, MpsDirs

__all__ = ["FakeMpsLauncher", "MpsLauncher", "NvidiaMpsLauncher"]


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

    def alive(self, dirs: MpsDirs) -> bool:
        """Whether the daemon runs and answers on its control pipe (never raises)."""
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

    def alive(self, dirs: MpsDirs) -> bool:
        """The control daemon answers a query through its pipe directory (a dead one cannot,
        whatever files it left)."""
        if not dirs.pipe.exists():
            return False
        try:
            self._control_cmd(dirs, "get_default_active_thread_percentage", timeout_s=5)
        except (RuntimeError, subprocess.TimeoutExpired, OSError):
            return False
        return True

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

    def alive(self, dirs: MpsDirs) -> bool:
        """Its pid file names a live process and its control socket answers with that pid."""
        pid = _read_pid(dirs.pipe / "nvidia-mps.pid")
        if pid is None or not _alive(pid):
            return False
        try:
            return query(dirs.pipe, "get_server_list", timeout_s=2.0) == str(pid)
        except OSError:
            return False

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
