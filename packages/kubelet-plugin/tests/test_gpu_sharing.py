"""The GPU driver's sharing step on the fake backend: plan-time errors per claim, prepare's
side effects and container edits, reference counting across claims, recovery at start."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dra_api_types import decode_opaque_config
from dra_kubelet_core.errors import (
    ClaimError,
    ClaimRef,
    DeviceConfigError,
    UnsupportedConfigError,
)
from dra_kubelet_plugin.allocation import PlannedDevice
from dra_kubelet_plugin.container_edits import FakeEdits
from dra_kubelet_plugin.gpu_sharing import (
    GpuSharing,
    SharingFailedError,
    intended_state,
    state_of,
)
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_nvlib import (
    ComputeMode,
    DeviceLibConfig,
    FakeDeviceLib,
    TimeSliceLevel,
    open_device_lib,
)
from dra_sharing import (
    ClaimSharingState,
    DynamicMig,
    FakeMpsLauncher,
    MpsDaemonManager,
    SharingGates,
    SharingManager,
    TimeSlicer,
)

API = "resource.nvidia.com/v1beta1"


@pytest.fixture
def lib(tmp_path: Path) -> Iterator[FakeDeviceLib]:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="2xH100-80GB,1xL4",
        fake_state_path=tmp_path / "gpus.json",
    )
    opened = open_device_lib(config)
    assert isinstance(opened, FakeDeviceLib)
    yield opened
    opened.close()


def _sharing(lib: FakeDeviceLib, tmp_path: Path, **gates: bool) -> GpuSharing:
    manager = SharingManager(
        time_slicer=TimeSlicer(lib),
        mps=MpsDaemonManager(tmp_path / "mps", lib=lib, launcher=FakeMpsLauncher()),
        dynamic_mig=DynamicMig(lib),
    )
    edits = FakeEdits(tmp_path / "claims")
    return GpuSharing(lib=lib, manager=manager, gates=SharingGates(**gates), edits=edits)


def _planned(device: NodeDevice, sharing: dict[str, Any] | None, field: str = "c[0]") -> Any:
    config = None
    if sharing is not None:
        config = decode_opaque_config({"apiVersion": API, "kind": "GpuConfig", "sharing": sharing})
    return PlannedDevice(
        request="gpu",
        pool_name="n1",
        device=device,
        admin_access=False,
        share_id=None,
        config=config,
        config_field=field if config is not None else None,
    )


REF_A = ClaimRef("ns", "claim-a", "uid-a")
REF_B = ClaimRef("ns", "claim-b", "uid-b")


def test_gate_off_is_a_per_claim_unsupported_config_error(
    lib: FakeDeviceLib, tmp_path: Path
) -> None:
    sharing = _sharing(lib, tmp_path)
    device = build_inventory(lib.gpus())[0]
    with pytest.raises(UnsupportedConfigError) as info:
        sharing.plan(REF_A, [_planned(device, {"strategy": "TimeSlicing"})])
    assert info.value.field == "c[0].sharing.strategy"
    assert "ns/claim-a" in str(info.value)
    assert "TimeSlicingSettings feature gate is not enabled" in str(info.value)


def test_time_slicing_shared_by_two_claims_reset_by_the_last(
    lib: FakeDeviceLib, tmp_path: Path
) -> None:
    sharing = _sharing(lib, tmp_path, time_slicing=True)
    device = build_inventory(lib.gpus())[0]
    planned = [
        _planned(device, {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Medium"}})
    ]

    async def scenario() -> None:
        first = await sharing.prepare(REF_A, sharing.plan(REF_A, planned), [device], others=[])
        assert "NVIDIA_FAKE_SMI_POLICY_0=Default|Medium" in first.edits.env
        second = await sharing.prepare(
            REF_B, sharing.plan(REF_B, planned), [device], others=[first.state]
        )
        assert lib.gpu(device.uuid).time_slice is TimeSliceLevel.MEDIUM
        await sharing.unprepare(REF_A.uid, first.state, others=[second.state])
        assert lib.gpu(device.uuid).time_slice is TimeSliceLevel.MEDIUM
        await sharing.unprepare(REF_B.uid, second.state, others=[])
        assert lib.gpu(device.uuid).time_slice is TimeSliceLevel.DEFAULT

    asyncio.run(scenario())


def test_mps_edits_and_teardown(lib: FakeDeviceLib, tmp_path: Path) -> None:
    sharing = _sharing(lib, tmp_path, mps=True)
    device = build_inventory(lib.gpus())[1]
    mps = {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 50}}

    async def scenario() -> None:
        result = await sharing.prepare(
            REF_A, sharing.plan(REF_A, [_planned(device, mps)]), [device], others=[]
        )
        env = dict(e.split("=", 1) for e in result.edits.env)
        assert env["CUDA_MPS_PIPE_DIRECTORY"] == "/tmp/nvidia-mps"
        assert env["NVIDIA_FAKE_SMI_POLICY_1"] == "Exclusive_Process|Default"
        targets = {m.container_path for m in result.edits.mounts}
        assert targets == {"/tmp/nvidia-mps", "/dev/shm", "/usr/bin/nvidia-cuda-mps-control"}
        # What the plugin checkpoints, and reads back after a restart.
        stored = {"sharing": result.state.to_json()}
        assert state_of(stored) == result.state
        await sharing.unprepare(REF_A.uid, state_of(stored), others=[])
        assert lib.gpu(device.uuid).compute_mode is ComputeMode.DEFAULT

    asyncio.run(scenario())


def test_dynamic_mig_placement_becomes_a_real_mig_device(tmp_path: Path) -> None:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n2",
        fake_fleet="1xA100-40GB",
        fake_state_path=tmp_path / "a.json",
    )
    with open_device_lib(config) as lib:
        assert isinstance(lib, FakeDeviceLib)
        sharing = _sharing(lib, tmp_path)
        devices = {d.name: d for d in build_inventory(lib.gpus(), dynamic_mig=True)}
        offer = devices["gpu-0-mig-3g20gb-9-4"]
        assert offer.dynamic
        assert offer.uuid == ""

        async def scenario() -> None:
            step = sharing.plan(REF_A, [_planned(offer, None)])
            result = await sharing.prepare(REF_A, step, [offer], others=[])
            (concrete,) = result.devices
            assert concrete.mig is not None
            assert concrete.uuid.startswith("MIG-")
            assert concrete.name == offer.name
            assert lib.gpu(offer.gpu.uuid).mig_mode.current
            await sharing.unprepare(REF_A.uid, result.state, others=[])
            assert lib.gpu(offer.gpu.uuid).mig_devices == ()

        asyncio.run(scenario())


def test_overlapping_placement_fails_the_claim_not_the_node(tmp_path: Path) -> None:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n3",
        fake_fleet="1xH100-80GB",
        fake_state_path=tmp_path / "h.json",
    )
    with open_device_lib(config) as lib:
        assert isinstance(lib, FakeDeviceLib)
        sharing = _sharing(lib, tmp_path)
        devices = {d.name: d for d in build_inventory(lib.gpus(), dynamic_mig=True)}
        big, small = devices["gpu-0-mig-4g40gb-5-0"], devices["gpu-0-mig-1g10gb-19-0"]

        async def scenario() -> None:
            first = await sharing.prepare(
                REF_A, sharing.plan(REF_A, [_planned(big, None)]), [big], others=[]
            )
            with pytest.raises(SharingFailedError) as info:
                await sharing.prepare(
                    REF_B,
                    sharing.plan(REF_B, [_planned(small, None)]),
                    [small],
                    others=[first.state],
                )
            assert isinstance(info.value, ClaimError)
            assert "overlaps" in str(info.value)

        asyncio.run(scenario())


def test_recover_undoes_half_prepared_and_keeps_completed(
    lib: FakeDeviceLib, tmp_path: Path
) -> None:
    sharing = _sharing(lib, tmp_path, time_slicing=True, mps=True)
    inventory = build_inventory(lib.gpus())
    ts = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}

    async def scenario() -> ClaimSharingState:
        done = await sharing.prepare(
            REF_A, sharing.plan(REF_A, [_planned(inventory[0], ts)]), [inventory[0]], others=[]
        )
        half = await sharing.prepare(
            REF_B,
            sharing.plan(REF_B, [_planned(inventory[1], {"strategy": "MPS"})]),
            [inventory[1]],
            others=[done.state],
        )
        restarted = _sharing(lib, tmp_path, time_slicing=True, mps=True)
        await restarted.recover({REF_A.uid: done.state}, {REF_B.uid: half.state})
        return done.state

    asyncio.run(scenario())
    assert lib.gpu(inventory[0].uuid).time_slice is TimeSliceLevel.LONG
    assert lib.gpu(inventory[1].uuid).compute_mode is ComputeMode.DEFAULT
    assert not (tmp_path / "mps").exists() or not any((tmp_path / "mps").iterdir())


def test_bad_mps_limit_is_a_per_claim_config_error(lib: FakeDeviceLib, tmp_path: Path) -> None:
    sharing = _sharing(lib, tmp_path, mps=True)
    device = build_inventory(lib.gpus())[0]
    mps = {"strategy": "MPS", "mpsConfig": {"defaultPerDevicePinnedMemoryLimit": {"3": "1Gi"}}}
    with pytest.raises(DeviceConfigError) as info:
        sharing.plan(REF_A, [_planned(device, mps)])
    assert info.value.field == 'c[0].sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit["3"]'


def test_mps_on_a_static_mig_device(tmp_path: Path) -> None:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n4",
        fake_fleet="1xA100-40GB:mig",
        fake_state_path=tmp_path / "m.json",
    )
    with open_device_lib(config) as lib:
        assert isinstance(lib, FakeDeviceLib)
        lib.create_mig_device(lib.gpus()[0].uuid, profile_id=9, placement_start=0)
        sharing = _sharing(lib, tmp_path, mps=True)
        (mig,) = build_inventory(lib.gpus())
        parameters = {
            "apiVersion": API,
            "kind": "MigDeviceConfig",
            "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 30}},
        }
        planned = PlannedDevice(
            request="mig",
            pool_name="n1",
            device=mig,
            admin_access=False,
            share_id=None,
            config=decode_opaque_config(parameters),
            config_field="c[0]",
        )

        async def scenario() -> None:
            result = await sharing.prepare(REF_A, sharing.plan(REF_A, [planned]), [mig], others=[])
            (daemon,) = result.state.mps_daemons
            assert daemon.device_uuids == (mig.uuid,)
            assert any(m.container_path == "/tmp/nvidia-mps" for m in result.edits.mounts)
            await sharing.unprepare(REF_A.uid, result.state, others=[])
            assert lib.gpu(mig.gpu.uuid).compute_mode is ComputeMode.DEFAULT

        asyncio.run(scenario())


def test_intended_state_names_the_time_slices_prepare_will_set(
    lib: FakeDeviceLib, tmp_path: Path
) -> None:
    sharing = _sharing(lib, tmp_path, time_slicing=True, mps=True)
    device = build_inventory(lib.gpus())[0]
    ts = {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}
    intended = intended_state(sharing.plan(REF_A, [_planned(device, ts)]))
    assert intended.time_slices == {device.uuid: int(TimeSliceLevel.LONG)}
    assert not intended.mps_daemons
    assert not intended.created_migs
    # Nothing to write ahead for MPS: recovery finds its daemons on disk.
    mps = intended_state(sharing.plan(REF_A, [_planned(device, {"strategy": "MPS"})]))
    assert mps.empty
