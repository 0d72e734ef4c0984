"""A stand-in for a node's host-managed ``nvidia-imex`` service (``imex.mode=hostManaged`` on
fake GPU nodes): ``dra-fake-imex daemon`` serving a Unix command socket
(``IMEX_CMD_UNIX_DOMAIN_PATH``), started and stopped by whoever plays the host (tests, e2e)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["HostImexProcess", "start_host_imex"]


class HostImexProcess:
    """The stand-in daemon; :meth:`start` waits until its socket exists."""

    def __init__(self, directory: Path, *, never_ready: bool = False) -> None:
        # A short directory: a Unix socket path has at most 107 bytes.
        self.socket = directory / "imex_ctrl.sock"
        self.config = directory / "config.cfg"
        (directory / "nodes.cfg").write_text("")
        self.config.write_text(
            "IMEX_CMD_ENABLED=1\n"
            f"IMEX_CMD_UNIX_DOMAIN_PATH={self.socket}\n"
            "IMEX_CMD_PORT=50005\n"
            f"IMEX_NODE_CONFIG_FILE={directory / 'nodes.cfg'}\n"
        )
        self._env = {**os.environ, "FAKE_IMEX_NEVER_READY": "1" if never_ready else "0"}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the daemon and wait for its socket."""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "dra_computedomain.fake_imex", "daemon", "-c", str(self.config)],
            env=self._env,
        )
        deadline = time.monotonic() + 30
        while not self.socket.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("the host IMEX stand-in did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the daemon."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@contextmanager
def start_host_imex(
    *, started: bool = True, never_ready: bool = False
) -> Iterator[HostImexProcess]:
    """A stand-in host IMEX in a fresh short directory, stopped and removed afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="imex-", dir="/tmp"))
    host = HostImexProcess(directory, never_ready=never_ready)
    try:
        if started:
            host.start()
        yield host
    finally:
        host.stop()
        shutil.rmtree(directory, ignore_errors=True)
