"""The ``flock`` locks the plugin instances of one node share in the plugin directory.

During a rolling update two plugin pods run on the node at once:

- both may receive kubelet calls, so every prepare and unprepare holds :class:`NodeLock`, an
  exclusive ``flock`` on one file, for the duration of the operation;
- only one may publish the node's ResourceSlices (two publishers whose views differ for a
  moment, say a health event one has seen and the other not yet, would overwrite each other
  and bump the pool generation on every write), so the publisher holds :class:`InstanceLease`
  from when it gets it until its instance stops: the instance that was there first keeps
  publishing until it exits, and the new one takes over then.

``flock`` is released by the kernel when the holder dies, so a SIGKILLed instance never leaves
the node locked nor its slices unowned.
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

__all__ = ["InstanceLease", "NodeLock"]


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


class InstanceLease:
    """An exclusive, cross-process lease on ``path`` held by one instance until it releases
    it or dies."""

    def __init__(self, path: Path, *, poll_s: float = 0.5) -> None:
        """Lease file ``path``; a waiting instance tries again every ``poll_s`` seconds."""
        self.path = path
        self._poll_s = poll_s
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this instance holds the lease."""
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lease if it is free (or already ours); return whether we hold it."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    async def acquire(self) -> None:
        """Wait until the lease is ours (polling: a waiting instance can still be stopped)."""
        while not self.try_acquire():
            await asyncio.sleep(self._poll_s)

    def release(self) -> None:
        """Give the lease up (nothing when not held)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
