"""Node-wide lock serializing prepare/unprepare across plugin instances.

During a rolling update two plugin pods run on the node at once; both may receive kubelet
calls, so every prepare and unprepare holds an exclusive ``flock`` on one file in the plugin
directory. ``flock`` is released by the kernel when the holder dies, so a SIGKILLed instance
never leaves the node locked.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

from dra_kubelet_core.errors import LockTimeoutError

__all__ = ["NodeLock"]


class NodeLock:
    """An exclusive, cross-process lock on ``path`` (also serializing tasks in this process)."""

    def __init__(self, path: Path, *, timeout_s: float = 60.0, poll_s: float = 0.005) -> None:
        """Lock file ``path``; acquisition gives up after ``timeout_s`` seconds."""
        self.path = path
        self._timeout_s = timeout_s
        self._poll_s = poll_s
        self._local = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Hold the lock for the duration of the ``async with`` block.

        Raises:
            LockTimeoutError: another instance held it for longer than the timeout.
        """
        async with self._local:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                await self._acquire(fd)
                try:
                    yield
                finally:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    async def _acquire(self, fd: int) -> None:
        deadline = time.monotonic() + self._timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"node lock {self.path}: not acquired within {self._timeout_s:.0f}s "
                        "(another plugin instance holds it)"
                    ) from None
                await asyncio.sleep(self._poll_s)
