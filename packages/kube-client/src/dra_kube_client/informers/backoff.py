"""Bounded exponential backoff between failed list/watch attempts."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """Delays ``initial_s * factor**n`` capped at ``max_s``, with jitter; reset on success."""

    initial_s: float = 0.5
    max_s: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2
    _failures: int = field(default=0, init=False)

    def next_delay(self) -> float:
        """The delay before the next attempt, after one more failure."""
        delay = min(self.max_s, self.initial_s * self.factor**self._failures)
        self._failures += 1
        # Jitter keeps many controllers (or informers) from retrying in lockstep.
        return delay * (1 - self.jitter * random.random())

    def reset(self) -> None:
        """Start again from ``initial_s`` (after a success)."""
        self._failures = 0
