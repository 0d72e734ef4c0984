"""Resolution of a claim's sharing configs: plans and every bad input the issue lists."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from dra_api_types import GpuConfig, MigDeviceConfig, decode_opaque_config
from dra_nvlib import TimeSliceLevel
from dra_sharing import (
    SharedDevice,
    SharingConfigError,
    SharingGates,
    Strategy,
    resolve_sharing,
    time_slice_level,
)

ALL = SharingGates(time_slicing=True, mps=True)
API = "resource.nvidia.com/v1beta1"
GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
GPU_B = "GPU-bbbbbbbb-0000-0000-0000-000000000000"
FIELD0 = "status.allocation.devices.config[0].opaque.parameters"
FIELD1 = "status.allocation.devices.config[1].opaque.parameters"


def gpu_config(sharing: dict[str, Any] | None) -> GpuConfig:
    body: dict[str, Any] = {"apiVersion": API, "kind": "GpuConfig"}
    if sharing is not None:
        body["sharing"] = sharing
    # Unvalidated on purpose: resolve_sharing must check on its own.
    config = GpuConfig.from_dict(body)
    assert isinstance(config, GpuConfig)
    return config


def gpu(
    uuid: str, config: object | None, field: str | None = FIELD0, request: str = "gpu"
) -> SharedDevice:
    return SharedDevice(
        request=request,
        device_name=f"gpu-{uuid[4]}",
        uuid=uuid,
        gpu_uuid=uuid,
        is_mig=False,
        config=config,
        config_field=field if config is not None else None,
    )


def test_no_config_means_no_sharing_and_no_implicit_time_slice() -> None:
    plan = resolve_sharing("ns/c", [gpu(GPU_A, None)], ALL)
    assert not plan.shares_anything
    assert plan.time_slices() == {}
    # A GpuConfig without sharing asks for nothing either (#1183).
    plan = resolve_sharing("ns/c", [gpu(GPU_A, gpu_config(None))], ALL)
    assert plan.time_slices() == {}


@pytest.mark.parametrize(
    ("interval", "level"),
    [
        (None, TimeSliceLevel.DEFAULT),
        ("Default", TimeSliceLevel.DEFAULT),
        ("Short", TimeSliceLevel.SHORT),
        ("Medium", TimeSliceLevel.MEDIUM),
        ("Long", TimeSliceLevel.LONG),
    ],
)
def test_time_slicing_interval_maps_to_level(interval: str | None, level: TimeSliceLevel) -> None:
    ts: dict[str, Any] = {"strategy": "TimeSlicing"}
    if interval is not None:
        ts["timeSlicingConfig"] = {"interval": interval}
    plan = resolve_sharing("ns/c", [gpu(GPU_A, gpu_config(ts)), gpu(GPU_B, gpu_config(ts))], ALL)
    assert plan.time_slices() == {GPU_A: level, GPU_B: level}
    assert time_slice_level(interval) is level


def test_time_slicing_on_mig_devices_is_accepted_and_changes_nothing() -> None:
    config = MigDeviceConfig.from_dict(
        {"apiVersion": API, "kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing"}}
    )
    mig = SharedDevice("mig", "gpu-0-mig-1g5gb-19-0", "MIG-1", GPU_A, True, config, FIELD0)
    plan = resolve_sharing("ns/c", [mig], ALL)
    assert plan.groups[0].strategy is Strategy.TIME_SLICING
    assert plan.time_slices() == {}


def test_mps_group_resolves_limits_by_sorted_uuid_index() -> None:
    config = gpu_config(
        {
            "strategy": "MPS",
            "mpsConfig": {
                "defaultActiveThreadPercentage": 50,
                "defaultPinnedDeviceMemoryLimit": "10Gi",
                "defaultPerDevicePinnedMemoryLimit": {"1": "5Gi"},
            },
        }
    )
    plan = resolve_sharing("ns/c", [gpu(GPU_B, config), gpu(GPU_A, config)], ALL)
    (group,) = plan.mps_groups()
    assert group.uuids == (GPU_A, GPU_B)
    assert group.mps is not None
    assert group.mps.active_thread_percentage == 50
    assert group.mps.pinned_memory_limits == {GPU_A: "10240M", GPU_B: "5120M"}


def test_multi_user_mps_is_planned_on_volta_and_newer_only() -> None:
    config = gpu_config({"strategy": "MPS", "mpsConfig": {"multiUser": True}})
    hopper = dataclasses.replace(gpu(GPU_A, config), compute_capability=(9, 0))
    (group,) = resolve_sharing("ns/c", [hopper], ALL).mps_groups()
    assert group.mps is not None
    assert group.mps.multi_user
    pascal = dataclasses.replace(gpu(GPU_B, config), compute_capability=(6, 1))
    err = _error([hopper, pascal])
    assert err.field == f"{FIELD0}.sharing.mpsConfig.multiUser"
    # NVIDIA's words, then which device and why.
    assert err.message.startswith("multiuser mode was requested but is not supported: device ")
    assert "compute capability 6.1, below 7.0 (Volta)" in err.message
    single = gpu_config({"strategy": "MPS", "mpsConfig": {"multiUser": False}})
    (group,) = resolve_sharing(
        "ns/c", [dataclasses.replace(gpu(GPU_B, single), compute_capability=(6, 1))], ALL
    ).mps_groups()
    assert group.mps is not None
    assert not group.mps.multi_user


def test_each_config_object_is_its_own_group() -> None:
    ts = gpu_config({"strategy": "TimeSlicing"})
    mps = gpu_config({"strategy": "MPS"})
    plan = resolve_sharing("ns/c", [gpu(GPU_A, ts, FIELD0), gpu(GPU_B, mps, FIELD1)], ALL)
    assert [g.strategy for g in plan.groups] == [Strategy.TIME_SLICING, Strategy.MPS]
    assert [g.config_field for g in plan.groups] == [FIELD0, FIELD1]


def _error(devices: list[SharedDevice], gates: SharingGates = ALL) -> SharingConfigError:
    with pytest.raises(SharingConfigError) as info:
        resolve_sharing("ns/claim-a", devices, gates)
    err = info.value
    assert err.claim == "ns/claim-a"
    assert "ns/claim-a" in str(err)
    assert err.request in str(err)
    assert err.field in str(err)
    return err


@pytest.mark.parametrize(
    ("strategy", "gate"), [("TimeSlicing", "TimeSlicingSettings"), ("MPS", "MPSSupport")]
)
def test_strategy_needs_its_feature_gate(strategy: str, gate: str) -> None:
    err = _error([gpu(GPU_A, gpu_config({"strategy": strategy}))], SharingGates())
    assert err.field == f"{FIELD0}.sharing.strategy"
    assert f"the {gate} feature gate is not enabled" in err.message


def test_mixed_strategies_on_one_gpu_in_one_claim() -> None:
    ts = gpu_config({"strategy": "TimeSlicing"})
    mps = gpu_config({"strategy": "MPS"})
    err = _error([gpu(GPU_A, ts, FIELD0, "a"), gpu(GPU_A, mps, FIELD1, "b")])
    assert err.request == "b"
    assert err.field == f"{FIELD1}.sharing.strategy"
    assert GPU_A in err.message
    assert "one sharing strategy per claim" in err.message


def test_two_intervals_on_one_gpu_in_one_claim() -> None:
    short = gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}})
    long = gpu_config({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}})
    err = _error([gpu(GPU_A, short, FIELD0), gpu(GPU_A, long, FIELD1)])
    assert "Long" in err.message
    assert "Short" in err.message


def test_mps_with_time_slicing_fields() -> None:
    config = gpu_config({"strategy": "MPS", "timeSlicingConfig": {"interval": "Short"}})
    err = _error([gpu(GPU_A, config)])
    assert err.field == f"{FIELD0}.sharing.timeSlicingConfig"


def test_time_slicing_with_mps_fields() -> None:
    config = gpu_config({"strategy": "TimeSlicing", "mpsConfig": {}})
    err = _error([gpu(GPU_A, config)])
    assert err.field == f"{FIELD0}.sharing.mpsConfig"


@pytest.mark.parametrize("pct", [-1, 101])
def test_thread_percentage_outside_0_100(pct: int) -> None:
    config = gpu_config({"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": pct}})
    err = _error([gpu(GPU_A, config)])
    assert err.field == f"{FIELD0}.sharing.mpsConfig.defaultActiveThreadPercentage"


@pytest.mark.parametrize("key", ["GPU-cccccccc-0000-0000-0000-000000000000", "1"])
def test_unknown_uuid_or_index_in_per_device_limits(key: str) -> None:
    config = gpu_config(
        {"strategy": "MPS", "mpsConfig": {"defaultPerDevicePinnedMemoryLimit": {key: "1Gi"}}}
    )
    err = _error([gpu(GPU_A, config)])
    assert err.field == f'{FIELD0}.sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit["{key}"]'
    assert "invalid device" in err.message


@pytest.mark.parametrize(
    ("mps", "where"),
    [
        ({"defaultPinnedDeviceMemoryLimit": "512Ki"}, "defaultPinnedDeviceMemoryLimit"),
        (
            {"defaultPerDevicePinnedMemoryLimit": {"0": "100"}},
            'defaultPerDevicePinnedMemoryLimit["0"]',
        ),
    ],
)
def test_limit_under_one_mib(mps: dict[str, Any], where: str) -> None:
    err = _error([gpu(GPU_A, gpu_config({"strategy": "MPS", "mpsConfig": mps}))])
    assert err.field == f"{FIELD0}.sharing.mpsConfig.{where}"
    assert "< 1Mi" in err.message


def test_mig_config_on_full_gpu() -> None:
    config = decode_opaque_config({"apiVersion": API, "kind": "MigDeviceConfig"})
    err = _error([gpu(GPU_A, config)])
    assert err.field == f"{FIELD0}.kind"
    assert "cannot apply MigDeviceConfig to device gpu-a of type gpu" in err.message


def test_gpu_config_on_mig_device() -> None:
    config = gpu_config({"strategy": "TimeSlicing"})
    mig = SharedDevice("mig", "gpu-0-mig-1g5gb-19-0", "MIG-1", GPU_A, True, config, FIELD0)
    err = _error([mig])
    assert err.request == "mig"
    assert "of type mig" in err.message
