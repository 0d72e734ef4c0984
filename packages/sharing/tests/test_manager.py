"""The manager end to end on the fake backend: prepare, unprepare, rollback and recovery."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dra_api_types import GpuConfig
from dra_nvlib import ComputeMode, FakeDeviceLib, FaultKind, TimeSliceLevel
from dra_sharing import (
    DynamicMig,
    FakeMpsLauncher,
    MigRequest,
    MpsDaemonManager,
    SharedDevice,
    SharingApplyError,
    SharingGates,
    SharingManager,
    TimeSlicer,
    resolve_sharing,
)

GATES = SharingGates(time_slicing=True, mps=True)


def _manager(lib: FakeDeviceLib, root: Path) -> SharingManager:
    return SharingManager(
        time_slicer=TimeSlicer(lib),
        mps=MpsDaemonManager(root, lib=lib, launcher=FakeMpsLauncher()),
        dynamic_mig=DynamicMig(lib),
    )


def _devices(lib: FakeDeviceLib, sharing: dict[str, Any], *indices: int) -> list[SharedDevice]:
    config = GpuConfig.from_dict(
        {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": sharing}
    )
    gpus = lib.gpus()
    return [
        SharedDevice("gpu", f"gpu-{i}", gpus[i].uuid, gpus[i].uuid, False, config, "config[0]")
        for i in indices
    ]


def test_time_sliced_claims_share_a_gpu_until_the_last_goes(
    lib: FakeDeviceLib, tmp_path: Path
) -> None:
    manager = _manager(lib, tmp_path / "mps")
    ts = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}
    plan = resolve_sharing("ns/a", _devices(lib, ts, 0), GATES)
    first = manager.prepare("uid-a", plan, others=[])
    second = manager.prepare("uid-b", plan, others=[first])
    gpu = lib.gpus()[0].uuid
    assert lib.gpu(gpu).time_slice is TimeSliceLevel.LONG
    manager.unprepare(first, others=[second])
    assert lib.gpu(gpu).time_slice is TimeSliceLevel.LONG
    manager.unprepare(second, others=[])
    assert lib.gpu(gpu).time_slice is TimeSliceLevel.DEFAULT


def test_mps_daemon_per_group_and_teardown(lib: FakeDeviceLib, tmp_path: Path) -> None:
    manager = _manager(lib, tmp_path / "mps")
    mps = {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 25}}
    plan = resolve_sharing("ns/a", _devices(lib, mps, 0, 1), GATES)
    state = manager.prepare("uid-a", plan, others=[])
    (daemon,) = state.mps_daemons
    assert len(daemon.device_uuids) == 2
    for uuid in daemon.device_uuids:
        assert lib.gpu(uuid).compute_mode is ComputeMode.EXCLUSIVE_PROCESS
    edits = manager.mps_edits(state)
    assert set(edits) == set(daemon.device_uuids)
    settings = Path(edits[daemon.device_uuids[0]].mounts[0][0]) / "control.settings"
    assert "default_active_thread_percentage 25.0" in settings.read_text()
    manager.unprepare(state, others=[])
    for uuid in daemon.device_uuids:
        assert lib.gpu(uuid).compute_mode is ComputeMode.DEFAULT
    assert not settings.exists()


def test_failure_after_time_slice_undoes_it(lib: FakeDeviceLib, tmp_path: Path) -> None:
    manager = _manager(lib, tmp_path / "mps")
    ts = _devices(lib, {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}, 0)
    mps = _devices(lib, {"strategy": "MPS"}, 1)
    mps = [SharedDevice(**{**d.__dict__, "config_field": "config[1]"}) for d in mps]
    plan = resolve_sharing("ns/a", ts + mps, GATES)
    lib.fail_next("set_compute_mode", error=FaultKind.NO_PERMISSION, gpu_uuid=mps[0].gpu_uuid)
    with pytest.raises(SharingApplyError) as info:
        manager.prepare("uid-a", plan, others=[])
    assert info.value.gpu == mps[0].gpu_uuid
    assert lib.gpu(ts[0].gpu_uuid).time_slice is TimeSliceLevel.DEFAULT
    assert MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=FakeMpsLauncher()).known() == set()


def test_recover_removes_what_no_claim_records(make_node: Any, tmp_path: Path) -> None:
    lib = make_node("1xH100-80GB,1xL4")
    h100, l4 = (g.uuid for g in lib.gpus())
    manager = _manager(lib, tmp_path / "mps")
    kept = manager.prepare(
        "uid-kept",
        resolve_sharing("ns/k", [], GATES),
        others=[],
        mig_requests=[MigRequest("gpu-0-mig-1g10gb-19-0", h100, 19, 0)],
    )
    # A crash after creating a MIG device and starting a daemon, before the checkpoint:
    manager.prepare(
        "uid-lost",
        resolve_sharing("ns/l", _devices(lib, {"strategy": "MPS"}, 1), GATES),
        others=[],
        mig_requests=[MigRequest("gpu-0-mig-1g10gb-19-1", h100, 19, 1)],
    )
    restarted = _manager(lib, tmp_path / "mps")
    report = restarted.recover({"uid-kept": kept})
    assert len(report.mps_daemons) == 1
    assert report.mps_daemons[0].startswith("uid-lost-")
    assert len(report.mig_devices) == 1
    assert [m.uuid for m in lib.gpu(h100).mig_devices] == [kept.created_migs[0].mig_uuid]
    assert lib.gpu(l4).compute_mode is ComputeMode.DEFAULT


def test_mps_next_to_another_claims_sharing_is_refused(lib: FakeDeviceLib, tmp_path: Path) -> None:
    manager = _manager(lib, tmp_path / "mps")
    ts = resolve_sharing("ns/a", _devices(lib, {"strategy": "TimeSlicing"}, 0), GATES)
    mps = resolve_sharing("ns/b", _devices(lib, {"strategy": "MPS"}, 0), GATES)
    sliced = manager.prepare("uid-a", ts, others=[])
    with pytest.raises(SharingApplyError, match="time-slices this GPU"):
        manager.prepare("uid-b", mps, others=[sliced])
    manager.unprepare(sliced, others=[])
    served = manager.prepare("uid-b", mps, others=[])
    with pytest.raises(SharingApplyError, match="MPS control daemon on this GPU"):
        manager.prepare("uid-c", mps, others=[served])
    with pytest.raises(SharingApplyError, match="MPS control daemon on this GPU"):
        manager.prepare("uid-a", ts, others=[served])
    manager.unprepare(served, others=[])


def test_shared_mig_placement_is_created_once_and_destroyed_by_its_last_claim(
    make_node: Any, tmp_path: Path
) -> None:
    lib = make_node("1xH100-80GB")
    h100 = lib.gpus()[0].uuid
    manager = _manager(lib, tmp_path / "mps")
    request = [MigRequest("gpu-0-mig-3g40gb-9-0", h100, 9, 0)]
    empty = resolve_sharing("ns/x", [], GATES)
    first = manager.prepare("uid-1", empty, others=[], mig_requests=request)
    second = manager.prepare("uid-2", empty, others=[first], mig_requests=request)
    assert first.created_migs == second.created_migs
    assert len(lib.gpu(h100).mig_devices) == 1
    manager.unprepare(first, others=[second])
    assert len(lib.gpu(h100).mig_devices) == 1
    manager.unprepare(second, others=[])
    assert lib.gpu(h100).mig_devices == ()


def test_recover_keeps_what_claims_with_lost_state_may_use(make_node: Any, tmp_path: Path) -> None:
    lib = make_node("1xH100-80GB,1xL4")
    h100 = lib.gpus()[0].uuid
    manager = _manager(lib, tmp_path / "mps")
    # A claim whose checkpointed state was lost (its CDI spec still serves), and a leftover
    # daemon of a claim nothing knows any more.
    lost = manager.prepare(
        "uid-lost",
        resolve_sharing("ns/l", _devices(lib, {"strategy": "MPS"}, 1), GATES),
        others=[],
        mig_requests=[MigRequest("gpu-0-mig-1g10gb-19-0", h100, 19, 0)],
    )
    restarted = _manager(lib, tmp_path / "mps")
    report = restarted.recover({}, unknown=["uid-lost"])
    assert report.mps_daemons == []
    assert report.mig_devices == [], "a MIG device does not name its claim: all are kept"
    assert [m.uuid for m in lib.gpu(h100).mig_devices] == [lost.created_migs[0].mig_uuid]
    assert {p.name for p in (tmp_path / "mps").iterdir()} == {lost.mps_daemons[0].daemon_id}
    # Once the claim is gone, the next recovery removes both.
    report = restarted.recover({})
    assert report.mps_daemons == [lost.mps_daemons[0].daemon_id]
    assert report.mig_devices == [lost.created_migs[0].mig_uuid]
