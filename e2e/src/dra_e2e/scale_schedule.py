"""Creating the scale workload at a steady rate: which Deployment gets the n-th pod.

The workload's Deployments start at zero replicas; the benchmark raises them tick by tick so
that ``rate`` pods per second are asked for in all. :func:`interleave` orders the pods so
every Deployment grows in proportion to its final size all along (the kinds of claims mix
from the first second, as they would in a busy cluster); :func:`replicas_after` says how many
replicas each Deployment has once the first ``n`` pods are asked for, and :func:`due` how
many pods are due ``elapsed`` seconds after the start.

Pure arithmetic.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence


class RateError(ValueError):
    """A creation rate that is not a positive number of pods per second."""

    def __init__(self, rate: float) -> None:
        super().__init__(f"SCALE_RATE: {rate} is not > 0 pods/s")
        self.rate = rate


def interleave(counts: Mapping[str, int]) -> list[str]:
    """Every pod's Deployment, in creation order: at each step the Deployment furthest behind
    its share (ties: the first in ``counts``' order) gets the next pod."""
    total = sum(counts.values())
    made: Counter[str] = Counter()
    order: list[str] = []
    for step in range(1, total + 1):
        name = max(
            (n for n, c in counts.items() if made[n] < c),
            key=lambda n: counts[n] * step / total - made[n],
        )
        made[name] += 1
        order.append(name)
    return order


def replicas_after(order: Sequence[str], n: int, names: Sequence[str]) -> dict[str, int]:
    """Each of ``names``' replicas once the first ``n`` pods of ``order`` are asked for."""
    made = Counter(order[: max(0, n)])
    return {name: made[name] for name in names}


def due(rate: float, elapsed: float, total: int) -> int:
    """Pods due ``elapsed`` seconds after the start at ``rate`` pods/s: the first at once."""
    if not rate > 0:
        raise RateError(rate)
    return min(total, 1 + math.floor(rate * max(0.0, elapsed)))
