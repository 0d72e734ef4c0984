"""Supervision of the IMEX daemon process: start, reload signal, restart on death, stop."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ImexCommands", "ImexProcess", "imex_commands", "query_ready"]

log = logging.getLogger(__name__)


class ImexCommands:
    """The daemon and readiness commands of one IMEX backend."""

    def __init__(self, daemon: Sequence[str], ready_query: Sequence[str]) -> None:
        """``daemon`` runs in the foreground; ``ready_query`` prints READY when ready."""
        self.daemon = tuple(daemon)
        self.ready_query = tuple(ready_query)


def imex_commands(backend: str, config: Path, hosts_file: Path | None = None) -> ImexCommands:
    """``real``: NVIDIA's ``nvidia-imex``/``nvidia-imex-ctl``; ``fake``: :mod:`.fake_imex`.

    ``hosts_file`` is where the fake resolves peer names (the real daemon uses the system
    resolver, which reads ``/etc/hosts``).
    """
    if backend == "real":
        return ImexCommands(
            ["nvidia-imex", "-c", str(config)], ["nvidia-imex-ctl", "-c", str(config), "-q"]
        )
    if backend == "fake":
        fake = [sys.executable, "-m", "dra_computedomain.fake_imex"]
        hosts = ["--hosts-file", str(hosts_file)] if hosts_file is not None else []
        return ImexCommands(
            [*fake, "daemon", "-c", str(config), *hosts], [*fake, "ctl", "-c", str(config), "-q"]
        )
    raise ValueError(f"IMEX_BACKEND: unknown backend {backend!r} (real, fake)")


def query_ready(commands: ImexCommands, *, timeout_s: float = 10.0) -> bool:
    """Whether the readiness query prints ``READY``."""
    try:
        done = subprocess.run(
            commands.ready_query, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.stdout.strip() == "READY"


class ImexProcess:
    """One supervised IMEX daemon process."""

    def __init__(self, commands: ImexCommands) -> None:
        """Nothing runs until :meth:`ensure_running`."""
        self.commands = commands
        self._proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int | None:
        """PID of the running process, if any."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    def ensure_running(self) -> bool:
        """Start the process if it is not running (first start or after it died).

        Returns True when it was (re)started.
        """
        if self._proc is not None:
            code = self._proc.poll()
            if code is None:
                return False
            log.warning(
                "IMEX daemon exited; restarting", extra={"event": "imex_exited", "exit_code": code}
            )
        self._proc = subprocess.Popen(self.commands.daemon)
        self.starts += 1
        log.info(
            "IMEX daemon started",
            extra={
                "event": "imex_started",
                "pid": self._proc.pid,
                "command": list(self.commands.daemon),
            },
        )
        return True

    def reload(self) -> None:
        """SIGUSR1: the IMEX daemon re-resolves the DNS names of its peers."""
        if self.pid is not None and self._proc is not None:
            self._proc.send_signal(signal.SIGUSR1)
            log.info("IMEX daemon signalled", extra={"event": "imex_reload", "pid": self.pid})

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``; waits for the exit."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
