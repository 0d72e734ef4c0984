"""Time-slicing on the fake backend: applied per GPU, reference-counted reset, per-GPU errors."""

from __future__ import annotations

import pytest
from dra_nvlib import ComputeMode, FakeDeviceLib, FaultKind, TimeSliceLevel
from dra_sharing import SharingApplyError, TimeSlicer, levels_to_reset


def test_apply_sets_compute_mode_default_then_the_level(lib: FakeDeviceLib) -> None:
    h0, h1 = lib.gpus()[0].uuid, lib.gpus()[1].uuid
    lib.set_compute_mode(h0, ComputeMode.PROHIBITED)
    done = TimeSlicer(lib).apply({h0: TimeSliceLevel.LONG, h1: TimeSliceLevel.SHORT}, {})
    assert done == {h0: 3, h1: 1}
    assert lib.gpu(h0).time_slice is TimeSliceLevel.LONG
    assert lib.gpu(h0).compute_mode is ComputeMode.DEFAULT
    assert lib.gpu(h1).time_slice is TimeSliceLevel.SHORT


def test_gpu_that_cannot_time_slice_names_gpu_and_reason(lib: FakeDeviceLib) -> None:
    a100 = lib.gpus()[2].uuid  # MIG mode on: no time-slice
    with pytest.raises(SharingApplyError) as info:
        TimeSlicer(lib).apply({a100: TimeSliceLevel.MEDIUM}, {})
    assert info.value.gpu == a100
    assert "MIG mode is on" in str(info.value)


def test_failure_resets_gpus_already_changed(lib: FakeDeviceLib) -> None:
    h0, h1 = lib.gpus()[0].uuid, lib.gpus()[1].uuid
    lib.fail_next("set_time_slice", error=FaultKind.NOT_SUPPORTED, gpu_uuid=h1)
    with pytest.raises(SharingApplyError) as info:
        TimeSlicer(lib).apply({h0: TimeSliceLevel.LONG, h1: TimeSliceLevel.LONG}, {})
    assert info.value.gpu == h1
    assert lib.gpu(h0).time_slice is TimeSliceLevel.DEFAULT


def test_another_claim_with_another_interval_is_refused(lib: FakeDeviceLib) -> None:
    h0 = lib.gpus()[0].uuid
    with pytest.raises(SharingApplyError, match="interval Long"):
        TimeSlicer(lib).apply({h0: TimeSliceLevel.SHORT}, {h0: {3}})
    # The same interval is shared fine.
    assert TimeSlicer(lib).apply({h0: TimeSliceLevel.LONG}, {h0: {3}}) == {h0: 3}


def test_reset_only_by_the_last_claim_holding_the_gpu(lib: FakeDeviceLib) -> None:
    h0 = lib.gpus()[0].uuid
    slicer = TimeSlicer(lib)
    mine = slicer.apply({h0: TimeSliceLevel.MEDIUM}, {})
    slicer.reset(mine, {h0: {2}})
    assert lib.gpu(h0).time_slice is TimeSliceLevel.MEDIUM
    slicer.reset(mine, {})
    assert lib.gpu(h0).time_slice is TimeSliceLevel.DEFAULT


def test_levels_to_reset_is_pure() -> None:
    assert levels_to_reset({"a": 1, "b": 2}, {"a": {1}, "b": set()}) == ["b"]
