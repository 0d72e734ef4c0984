"""MPS control daemons: one per prepared device group, started ready, stopped at unprepare.

Layout on the host, below the manager's root (the plugin's ``mps/`` directory)::

    <root>/<daemonID>/pipe   CUDA_MPS_PIPE_DIRECTORY (bind-mounted at /tmp/nvidia-mps)
    <root>/<daemonID>/log    CUDA_MPS_LOG_DIRECTORY
    <root>/<daemonID>/shm    the daemon's /dev/shm (a tmpfs on real nodes)
    <root>/<daemonID>/spec.json   what was started (so a restarted plugin can check it,
                                  restart it with the same settings, or stop it)

The daemon ID is ``<claimUID>-<5 hex of sha256 of the sorted device UUIDs>``, NVIDIA's form,
so the same group always maps to the same directory and a restarted plugin finds it again.

Two launchers: :class:`NvidiaMpsLauncher` runs ``nvidia-cuda-mps-control -d`` from the
driver root and pipes the settings into it; :class:`FakeMpsLauncher` runs our own daemon
(:mod:`dra_sharing.fake_mps_daemon`), which honours the same pipe directory and publishes
the settings there for a client in the pod to read back. The manager sets compute mode
EXCLUSIVE_PROCESS on the group's GPUs before the daemon starts and back to DEFAULT after it
stops.

A daemon's lifetime is its claim's, not the plugin's: :meth:`MpsDaemonManager.ensure` runs
for every daemon a prepared claim records before a restarted plugin serves, and re-adopts a
daemon that still answers on its control pipe or restarts a dead one from its ``spec.json``
(the packages's README says where daemons run so that a plugin crash does not kill them).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from dra_nvlib import ComputeMode, DeviceError, DeviceLib

from dra_sharing.errors import SharingApplyError
from dra_sharing.fake_mps_daemon import SETTINGS_FILE, render_mps_control_client
from dra_sharing.mps_launchers import FakeMpsLauncher, MpsLauncher, NvidiaMpsLauncher
from dra_sharing.mps_spec import MpsDaemonSpec, MpsDirs, MpsSpecError, mps_daemon_id

__all__ = [
    "CONTAINER_PIPE_DIR",
    "FakeMpsLauncher",
    "MpsDaemonManager",
    "MpsDaemonSpec",
    "MpsDirs",
    "MpsEdits",
    "MpsLauncher",
    "MpsSpecError",
    "NvidiaMpsLauncher",
    "mps_daemon_id",
]

log = logging.getLogger(__name__)

#: Where containers find the pipe directory (NVIDIA's path).
CONTAINER_PIPE_DIR = "/tmp/nvidia-mps"
CONTAINER_SHM_DIR = "/dev/shm"
CONTAINER_CLIENT = "/usr/bin/nvidia-cuda-mps-control"
_SPEC_FILE = "spec.json"


@dataclass(frozen=True)
class MpsEdits:
    """What a container of the group needs: env and (host, container) bind mounts."""

    env: tuple[str, ...]
    mounts: tuple[tuple[str, str], ...]


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
            self._launch(spec, dirs)
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

    def _launch(self, spec: MpsDaemonSpec, dirs: MpsDirs) -> None:
        for gpu in spec.gpu_uuids:
            self._set_mode(gpu, ComputeMode.EXCLUSIVE_PROCESS)
        self._launcher.start(spec, dirs, timeout_s=self._timeout)

    def spec(self, daemon_id: str) -> MpsDaemonSpec:
        """The spec stored next to the daemon when it was started.

        Raises:
            MpsSpecError: ``spec.json`` is missing, unreadable or malformed (names the field).
        """
        path = self.dirs(daemon_id).root / _SPEC_FILE
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise MpsSpecError(
                gpu=daemon_id, operation="read MPS daemon spec", message=f"{path}: {exc}"
            ) from exc
        return MpsDaemonSpec.from_json(doc, daemon_id=daemon_id)

    def ensure(self, daemon_id: str) -> Literal["adopted", "restarted"]:
        """Make sure a prepared claim's daemon runs (a restarted plugin, before it serves).

        A daemon that answers on its control pipe is re-adopted as it is; a dead one is
        restarted with the settings of its ``spec.json`` in the same directories (the pipe
        and shm directories themselves are kept: running containers bind-mount them). Either
        way its GPUs are left in EXCLUSIVE_PROCESS. On failure the directories and the spec
        stay, so the next try finds them again.

        Raises:
            MpsSpecError: the stored spec is missing or malformed.
            SharingApplyError: compute mode or the restart failed (names GPU and reason).
        """
        spec = self.spec(daemon_id)
        dirs = self.dirs(daemon_id)
        if self._launcher.alive(dirs):
            for gpu in spec.gpu_uuids:
                self._set_mode(gpu, ComputeMode.EXCLUSIVE_PROCESS)
            log.info(
                "MPS control daemon re-adopted",
                extra={"event": "mps_daemon_adopted", "daemon_id": daemon_id},
            )
            return "adopted"
        # A hung daemon (alive, not answering) is stopped; a dead one's files are cleared so
        # that its leftover ready marker is not taken for the new daemon's.
        self._launcher.stop(dirs, timeout_s=self._timeout)
        for d in (dirs.pipe, dirs.log, dirs.shm):
            d.mkdir(parents=True, exist_ok=True)
        for leftover in dirs.pipe.iterdir():
            if not leftover.is_dir():
                leftover.unlink(missing_ok=True)
        if self._launcher.provides_client and not dirs.client.exists():
            dirs.client.write_text(render_mps_control_client())
            dirs.client.chmod(0o755)
        self._launch(spec, dirs)
        log.warning(
            "MPS control daemon was not running; restarted with its recorded settings",
            extra={
                "event": "mps_daemon_restarted",
                "daemon_id": daemon_id,
                "devices": list(spec.device_uuids),
            },
        )
        return "restarted"

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
