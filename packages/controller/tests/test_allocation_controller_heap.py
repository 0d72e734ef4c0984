"""The reconcile loop's heap policy: frozen after each reconcile, all collected periodically."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
from controller_objects import GPU_CLASS, claim, gpu, slice_, stores
from dra_controller.allocation_controller import AllocationController, ControllerMetrics, Settings
from dra_controller.allocation_controller.heap import HeapPolicy
from dra_controller.allocation_controller.view import ClusterView


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


def test_garbage_made_since_the_last_freeze_is_collected_not_frozen() -> None:
    # Another thread's cyclic garbage between two reconciles (a decoded watch event, a
    # scrape served) that no young collection reached yet: the automatic collections are
    # off, so only the policy's own can free it.
    policy = HeapPolicy(full_every_s=600, clock=lambda: 0.0)
    gc.disable()
    try:
        policy.after_reconcile()
        cycle = _Cycle()
        alive = weakref.ref(cycle)
        del cycle
        policy.after_reconcile()  # not time for a full collection
        assert alive() is None
        kept = _Cycle()  # alive at the freeze: frozen, as before
        kept_alive = weakref.ref(kept)
        policy.after_reconcile()
        del kept
        gc.collect()
        assert kept_alive() is not None
    finally:
        gc.enable()
        policy.release()
    gc.collect()
    assert kept_alive() is None


@pytest.mark.parametrize("period", [600.0, None], ids=["with-a-period", "without"])
def test_the_loop_freezes_after_reconciling_and_releases_when_it_stops(
    period: float | None,
) -> None:
    ctl = AllocationController(
        stores([GPU_CLASS, claim("c")]),
        metrics=ControllerMetrics(),
        settings=Settings(debounce_s=0, full_gc_every_s=period),
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
    # Without a period nothing is ever frozen; with one, all is handed back at the end.
    assert (frozen > 0) is (period is not None)
    assert gc.get_freeze_count() == 0


def test_dropped_slices_bring_the_full_collection_forward() -> None:
    now = [0.0]
    policy = HeapPolicy(full_every_s=600, clock=lambda: now[0], dropped_share=0.1)
    cycle = _Cycle()
    alive = weakref.ref(cycle)
    try:
        policy.after_reconcile(slices_dropped=0, slices_cached=100)
        del cycle
        gc.collect()
        assert alive() is not None
        policy.after_reconcile(slices_dropped=9, slices_cached=100)
        assert alive() is not None  # 9 % of the cached slices dropped: not yet
        policy.after_reconcile(slices_dropped=10, slices_cached=100)
        assert alive() is None  # a tenth: everything collected, long before 600 s
        again = _Cycle()
        alive = weakref.ref(again)
        policy.after_reconcile(slices_dropped=10, slices_cached=100)
        del again
        policy.after_reconcile(slices_dropped=19, slices_cached=100)
        assert alive() is not None  # counted from the last full collection: 9 since
        policy.after_reconcile(slices_dropped=20, slices_cached=100)
        assert alive() is None
    finally:
        policy.release()


def test_the_view_counts_parsed_slices_replaced_deleted_or_reread_for_new_rules() -> None:
    st = stores([GPU_CLASS, slice_("n1", [gpu("g0", "40Gi")]), slice_("n2", [gpu("g0", "40Gi")])])
    view = ClusterView(stores=st)
    view.snapshot()
    view.snapshot()  # unchanged: the same parses are kept
    assert (view.slices_dropped, view.slices_parsed) == (0, 2)
    st["ResourceSlice"].upsert(slice_("n1", [gpu("g0", "40Gi")], rv="2"))
    view.snapshot()
    assert (view.slices_dropped, view.slices_parsed) == (1, 2)
    st["ResourceSlice"].delete("n2-slice")
    view.snapshot()
    assert (view.slices_dropped, view.slices_parsed) == (2, 1)
    # A new DeviceTaintRule: every slice is read again.
    st["DeviceTaintRule"].upsert(
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "drain", "resourceVersion": "1"},
            "spec": {
                "deviceSelector": {"driver": "gpu.nvidia.com"},
                "taint": {"key": "maintenance", "effect": "NoSchedule"},
            },
        }
    )
    tainted = view.snapshot()
    assert (view.slices_dropped, view.slices_parsed) == (3, 1)
    assert [t.key for d in tainted.slices[0].devices for t in d.taints] == ["maintenance"]
    # A relist: the slice read before and unchanged is kept, a changed one dropped.
    st["ResourceSlice"].replace(
        [slice_("n1", [gpu("g0", "40Gi")], rv="2"), slice_("n3", [gpu("g0", "40Gi")])]
    )
    view.snapshot()
    assert (view.slices_dropped, view.slices_parsed) == (3, 2)
    st["ResourceSlice"].replace([slice_("n3", [gpu("g0", "40Gi")], rv="2")])
    view.snapshot()  # n1 gone, n3 replaced
    assert (view.slices_dropped, view.slices_parsed) == (5, 1)
