"""Keeps Python's cyclic garbage collector off the controller's long-lived caches.

A full collection walks every object the collector tracks: at 5,000 claims and 1,000 nodes
of 8 GPUs ~390,000 (the informer caches and their parsed objects), ~250 ms with the GIL
held, so no reconcile and no scrape runs meanwhile. A reconcile's own objects that live
through it (the snapshot, the cluster's per-node pools) are promoted often enough to start
one every ~5 reconciles: in-process, 8 full collections of 240 ms in 40 reconciles of 40 ms
(``packages/controller/bench/bench_metrics_scrape.py``), the tail of the metrics lag.

After each reconcile, :class:`HeapPolicy` freezes what is alive (``gc.freeze``: left out of
later collections, still freed by reference counting as soon as nothing refers to it), so a
full collection walks only what was created since. Just before, it collects what is not
frozen yet, the objects made since the last freeze: the other threads (informers decoding
watch events, the metrics server) make cyclic garbage between reconciles, and a freeze
before the young collections reached it kept it until the next full collection. Against a
local API server feeding the 1,000-node run's 5,164 claims at ~19 a second, the controller
grew 108 MB freezing alone, 67.5 MB collecting first, 68.6 MB never freezing. That
collection looks only at what is not frozen (in process, ~100 objects a reconcile, 0.13 ms
against a 2.5 ms reconcile), not the 390,000 frozen. What becomes cyclic garbage after it
was frozen is found at the next full collection of everything, every ``full_every_s``.

One thing the loop does turn into cyclic garbage: a parsed slice, once its slice is replaced
or deleted (its devices refer back to it). Frozen, it would stay until the periodic
collection: in-process, each 10 % of 1,000 nodes' slices replaced kept ~6 MB more. So
everything is also collected once the slices dropped since the last full collection reach
``dropped_share`` of those cached (as CPython's own collector waits for a quarter of its
long-lived objects to be new; a tenth here, to keep the peak low at ~0.5 s a collection).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


class HeapPolicy:
    """Collect what is not frozen and freeze it after each reconcile; unfreeze and collect
    everything every ``full_every_s``, or sooner once enough cached slices were dropped."""

    def __init__(
        self,
        full_every_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        *,
        dropped_share: float = 0.1,
    ) -> None:
        """Collect everything every ``full_every_s`` (by ``clock``), and whenever the slices
        dropped since the last time reach ``dropped_share`` of those cached."""
        self.full_every_s = full_every_s
        self.clock = clock
        self.dropped_share = dropped_share
        self._last_full = clock()
        self._dropped_at_full = 0

    def after_reconcile(self, *, slices_dropped: int = 0, slices_cached: int = 0) -> None:
        """Collect the garbage among the objects made since the last freeze, and freeze the
        rest; first unfreeze, to collect everything, when it is time to.

        ``slices_dropped`` is the view's running count of parsed slices replaced or deleted,
        ``slices_cached`` how many it holds now.
        """
        now = self.clock()
        dropped = slices_dropped - self._dropped_at_full
        churned = dropped > 0 and dropped >= self.dropped_share * max(slices_cached, 1)
        if churned or now - self._last_full >= self.full_every_s:
            self._last_full = now
            self._dropped_at_full = slices_dropped
            gc.unfreeze()
        # Only objects not frozen are looked at: those made since the last freeze (the full
        # collection's: everything). What of them is cyclic garbage is freed, not frozen.
        gc.collect()
        gc.freeze()

    def release(self) -> None:
        """Hand every frozen object back to the collector (when the loop ends)."""
        gc.unfreeze()
