"""Dynamic MIG on the fake backend: create with MIG mode, rollback, destroy, leftovers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from dra_nvlib import FakeDeviceLib, FaultKind
from dra_sharing import DynamicMig, MigRequest, SharingApplyError


def _req(gpu: str, profile: int, start: int) -> MigRequest:
    return MigRequest(f"gpu-0-mig-x-{profile}-{start}", gpu, profile, start)


def test_create_enables_mig_mode_and_destroy_disables_it_on_hopper(
    make_node: Callable[[str], FakeDeviceLib],
) -> None:
    lib = make_node("1xH100-80GB")
    gpu = lib.gpus()[0].uuid
    created = DynamicMig(lib).create([_req(gpu, 9, 0), _req(gpu, 19, 4)])
    info = lib.gpu(gpu)
    assert info.mig_mode.current
    assert {m.uuid for m in info.mig_devices} == {c.mig_uuid for c in created}
    assert [(c.profile_id, c.placement_start) for c in created] == [(9, 0), (19, 4)]
    # dcgm-exporter's GPU_I_ID of each device, recorded with it.
    assert {c.mig_uuid: c.gi_id for c in created} == {m.uuid: m.gi_id for m in info.mig_devices}
    DynamicMig(lib).destroy(created)
    info = lib.gpu(gpu)
    assert info.mig_devices == ()
    assert not info.mig_mode.current


def test_ampere_keeps_mig_mode_after_destroy(make_node: Callable[[str], FakeDeviceLib]) -> None:
    lib = make_node("1xA100-40GB")
    gpu = lib.gpus()[0].uuid
    DynamicMig(lib).destroy(DynamicMig(lib).create([_req(gpu, 19, 0)]))
    assert lib.gpu(gpu).mig_mode.current


def test_overlap_fails_and_rolls_back(make_node: Callable[[str], FakeDeviceLib]) -> None:
    lib = make_node("1xA100-40GB:mig")
    gpu = lib.gpus()[0].uuid
    with pytest.raises(SharingApplyError) as info:
        DynamicMig(lib).create([_req(gpu, 19, 0), _req(gpu, 9, 0)])
    assert info.value.gpu == gpu
    assert "overlaps" in str(info.value)
    assert lib.gpu(gpu).mig_devices == ()


def test_partial_failure_destroys_earlier_instances(
    make_node: Callable[[str], FakeDeviceLib],
) -> None:
    lib = make_node("1xH200:mig")
    gpu = lib.gpus()[0].uuid
    with pytest.raises(SharingApplyError, match="profile 5 at 4"):
        DynamicMig(lib).create([_req(gpu, 14, 0), _req(gpu, 5, 4)])  # 4g only starts at 0
    assert lib.gpu(gpu).mig_devices == ()


def test_gpu_without_mig_is_a_per_claim_error(make_node: Callable[[str], FakeDeviceLib]) -> None:
    lib = make_node("1xL4")
    gpu = lib.gpus()[0].uuid
    with pytest.raises(SharingApplyError, match="cannot do MIG"):
        DynamicMig(lib).create([_req(gpu, 19, 0)])


def test_destroy_unknown_removes_leftovers_only(make_node: Callable[[str], FakeDeviceLib]) -> None:
    lib = make_node("2xA100-40GB:mig")
    g0, g1 = (g.uuid for g in lib.gpus())
    (kept,) = DynamicMig(lib).create([_req(g0, 19, 0)])
    leftover = lib.create_mig_device(g1, profile_id=9, placement_start=4)
    assert DynamicMig(lib).destroy_unknown({kept.mig_uuid}) == [leftover.uuid]
    assert [m.uuid for m in lib.gpu(g0).mig_devices] == [kept.mig_uuid]
    assert lib.gpu(g1).mig_devices == ()


def test_destroy_of_a_missing_device_is_fine(make_node: Callable[[str], FakeDeviceLib]) -> None:
    lib = make_node("1xA100-40GB:mig")
    gpu = lib.gpus()[0].uuid
    created = DynamicMig(lib).create([_req(gpu, 19, 0)])
    lib.destroy_mig_device(created[0].mig_uuid)
    DynamicMig(lib).destroy(created)


def test_fault_on_the_second_gpu_destroys_the_first(
    make_node: Callable[[str], FakeDeviceLib],
) -> None:
    lib = make_node("2xH100-80GB:mig")
    g0, g1 = (g.uuid for g in lib.gpus())
    lib.fail_next("create_mig_device", error=FaultKind.INSUFFICIENT_RESOURCES, gpu_uuid=g1)
    with pytest.raises(SharingApplyError) as info:
        DynamicMig(lib).create([_req(g0, 19, 0), _req(g1, 19, 0)])
    assert info.value.gpu == g1
    assert lib.gpu(g0).mig_devices == ()
    assert lib.gpu(g1).mig_devices == ()
