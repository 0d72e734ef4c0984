"""The reconcile loop's heap policy: frozen after each reconcile, all collected periodically."""

from __future__ import annotations

import gc
import threading
import weakref

from controller_objects import GPU_CLASS, claim, stores
from dra_controller.allocation_controller import AllocationController, ControllerMetrics, Settings
from dra_controller.allocation_controller.heap import HeapPolicy


class _Cycle:
    """An object referring to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def _after_first_reconcile(ctl: AllocationController) -> int:
    """The freeze count once the loop's first reconcile and what follows it are done."""
    assert ctl.reconciled.wait(30)
    ctl.reconciled.clear()
    ctl.dirty.set()
    # The second reconcile starts only after the first one's heap policy ran.
    assert ctl.reconciled.wait(30)
    return gc.get_freeze_count()


def test_frozen_cycles_wait_for_the_periodic_full_collection() -> None:
    now = [0.0]
    policy = HeapPolicy(full_every_s=60, clock=lambda: now[0])
    cycle = _Cycle()
    alive = weakref.ref(cycle)
    try:
        policy.after_reconcile()
        assert gc.get_freeze_count() > 0
        del cycle
        gc.collect()
        assert alive() is not None  # frozen: left out of collections
        now[0] = 59
        policy.after_reconcile()
        assert alive() is not None
        now[0] = 60
        policy.after_reconcile()  # unfreeze, collect everything, freeze again
        assert alive() is None
        assert gc.get_freeze_count() > 0
    finally:
        policy.release()
    assert gc.get_freeze_count() == 0


def test_the_loop_freezes_after_reconciling_and_releases_when_it_stops() -> None:
    ctl = AllocationController(
        stores([GPU_CLASS, claim("c")]),
        metrics=ControllerMetrics(),
        settings=Settings(debounce_s=0, full_gc_every_s=600),
    )
    stop = threading.Event()
    loop = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
    loop.start()
    try:
        frozen = _after_first_reconcile(ctl)
    finally:
        stop.set()
        ctl.dirty.set()
        loop.join(30)
    assert not loop.is_alive()
    assert frozen > 0
    assert gc.get_freeze_count() == 0


def test_no_freezing_without_a_period() -> None:
    ctl = AllocationController(
        stores([GPU_CLASS, claim("c")]),
        metrics=ControllerMetrics(),
        settings=Settings(debounce_s=0, full_gc_every_s=None),
    )
    stop = threading.Event()
    loop = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
    loop.start()
    try:
        frozen = _after_first_reconcile(ctl)
    finally:
        stop.set()
        ctl.dirty.set()
        loop.join(30)
    assert frozen == 0
