"""Keeps Python's cyclic garbage collector off the controller's long-lived caches.

A full collection walks every object the collector tracks: at 5,000 claims and 1,000 nodes
of 8 GPUs ~390,000 (the informer caches and their parsed objects), ~250 ms with the GIL
held, so no reconcile and no scrape runs meanwhile. A reconcile's own objects that live
through it (the snapshot, the cluster's per-node pools) are promoted often enough to start
one every ~5 reconciles: in-process, 8 full collections of 240 ms in 40 reconciles of 40 ms
(``packages/controller/bench/bench_metrics_scrape.py``), the tail of the metrics lag.

After each reconcile, :class:`HeapPolicy` freezes what is alive (``gc.freeze``: left out of
later collections, still freed by reference counting as soon as nothing refers to it), so a
full collection walks only what was created since. The reconcile loop makes no cyclic
garbage (none found over 30 reconciles in the benchmark); what other code might make among
frozen objects is found at the next full collection of everything, every ``full_every_s``.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


class HeapPolicy:
    """Freeze after each reconcile; unfreeze and collect everything every ``full_every_s``."""

    def __init__(
        self, full_every_s: float = 600.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        """Collect everything at most every ``full_every_s`` (by ``clock``)."""
        self.full_every_s = full_every_s
        self.clock = clock
        self._last_full = clock()

    def after_reconcile(self) -> None:
        """Freeze what is alive now, first collecting everything when it is time to."""
        now = self.clock()
        if now - self._last_full >= self.full_every_s:
            self._last_full = now
            gc.unfreeze()
            gc.collect()
        gc.freeze()

    def release(self) -> None:
        """Hand every frozen object back to the collector (when the loop ends)."""
        gc.unfreeze()
