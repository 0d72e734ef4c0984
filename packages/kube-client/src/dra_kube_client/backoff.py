"""Bounded, jittered exponential backoff between failed attempts.

One rule for every retry loop of the workspace (informers, slice publishing, kubelet
registration, health watches, claim retries, the domain daemon's rounds): the n-th delay after
consecutive failures is ``initial_s * factor**(n-1)``, capped at ``max_s``, then shortened by up
to ``jitter`` of itself so that many replicas (or informers) do not retry in lockstep.
Jittering downwards keeps every delay within the cap. A success resets the count.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(slots=True)
class Backoff:
    """Delays ``initial_s * factor**n`` capped at ``max_s``, with jitter; reset on success.

    ``rand`` returns a number in ``[0, 1)``; tests pass a fixed one. ``jitter=0`` gives the
    plain doubling sequence.
    """

    initial_s: float = 0.5
    max_s: float = 30.0
    factor: float = 2.0
    jitter: float = 0.2
    rand: Callable[[], float] = field(default=random.random, repr=False, compare=False)
    _failures: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        """Reject settings that make no sequence."""
        if self.initial_s < 0 or self.max_s < 0:
            raise ValueError(
                f"backoff delays must be >= 0 (initial {self.initial_s}, max {self.max_s})"
            )
        if self.factor < 1:
            raise ValueError(f"backoff factor must be >= 1, not {self.factor}")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"backoff jitter must be within [0, 1], not {self.jitter}")

    @property
    def failures(self) -> int:
        """Consecutive failures counted since the last :meth:`reset`."""
        return self._failures

    def delay(self, attempt: int) -> float:
        """The delay before retry ``attempt`` (1, 2, ...), without jitter; pure."""
        try:
            raw = self.initial_s * self.factor ** max(attempt - 1, 0)
        except OverflowError:  # the exponent outgrew floats long after the cap was reached
            raw = self.max_s
        return float(min(self.max_s, raw))

    def next_delay(self) -> float:
        """The delay before the next attempt, after one more failure."""
        self._failures += 1
        return self.jittered(self.delay(self._failures))

    def jittered(self, seconds: float) -> float:
        """``seconds`` shortened by up to ``jitter`` of itself (never longer, never negative);
        for pauses that count no failure (a watch that ended early, an API not served)."""
        # Jitter keeps many controllers (or informers, or nodes) from retrying in lockstep.
        return seconds * (1 - self.jitter * self.rand()) if self.jitter else seconds

    def reset(self) -> None:
        """Start again from ``initial_s`` (after a success)."""
        self._failures = 0
