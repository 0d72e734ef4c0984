"""Commands run with the cyclic garbage collector paused, and leave it as they found it."""

from __future__ import annotations

import gc

from kubectl_dra.cli import without_cycle_collection


def test_the_collector_is_paused_inside_and_enabled_again_after() -> None:
    assert gc.isenabled()
    with without_cycle_collection():
        inside = gc.isenabled()
    assert not inside
    assert gc.isenabled()


def test_a_collector_paused_before_stays_paused() -> None:
    gc.disable()
    try:
        with without_cycle_collection():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
