"""A coalescing queue of keys (client-go's workqueue, with a short hold to fold bursts).

A key added again while it waits is not added twice; a key added while it is being processed
is processed once more after :meth:`KeyQueue.done` (never twice at once). A key becomes ready
``delay_s`` after its first add, so a burst of changes to one domain (a status write, its
daemon pods turning Ready one by one) is one reconcile.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

__all__ = ["KeyQueue"]


class KeyQueue:
    """Keys waiting to be processed, each at most once in the queue and once in progress."""

    def __init__(self, *, delay_s: float = 0.0, clock: Callable[[], float] = time.monotonic):
        """``delay_s``: how long a key is held after its first add; ``clock`` tells the time."""
        self.delay_s = delay_s
        self._clock = clock
        self._due: dict[str, float] = {}  # waiting keys, in the order added (dicts keep it)
        self._processing: set[str] = set()
        self._again: set[str] = set()  # added while being processed
        self._cond = threading.Condition()

    def add(self, keys: Iterable[str]) -> None:
        """Queue each of ``keys`` unless it is already waiting."""
        with self._cond:
            due = self._clock() + self.delay_s
            for key in keys:
                if key in self._processing:
                    self._again.add(key)
                elif key not in self._due:
                    self._due[key] = due
            self._cond.notify_all()

    def _take(self) -> str | None:
        # Keys are due in the order they were added (one delay for all): the first decides.
        for key, due in self._due.items():
            if due > self._clock():
                return None
            del self._due[key]
            self._processing.add(key)
            return key
        return None

    def pop_ready(self) -> str | None:
        """The next due key, now in progress (call :meth:`done` after), or None."""
        with self._cond:
            return self._take()

    def get(self, timeout_s: float) -> str | None:
        """Wait up to ``timeout_s`` for a due key (see :meth:`pop_ready`)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                key = self._take()
                remaining = deadline - time.monotonic()
                if key is not None or remaining <= 0:
                    return key
                if self._due:
                    first_due = next(iter(self._due.values()))
                    remaining = min(remaining, max(first_due - self._clock(), 0.001))
                self._cond.wait(remaining)

    def done(self, key: str) -> None:
        """``key`` is processed; queue it again if it was added meanwhile."""
        with self._cond:
            self._processing.discard(key)
            if key in self._again:
                self._again.discard(key)
                self._due.setdefault(key, self._clock() + self.delay_s)
                self._cond.notify_all()

    def __len__(self) -> int:
        """Keys waiting (due or not), those in progress not counted."""
        with self._cond:
            return len(self._due)
