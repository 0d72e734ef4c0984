"""MIG placement and capacity rules per profile table, as the hardware enforces them."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_nvlib import (
    GPU_MODELS,
    DeviceLibConfig,
    FakeDeviceLib,
    InsufficientResourcesError,
    InvalidArgumentError,
    InvalidStateError,
    NotSupportedError,
    PlacementConflictError,
    open_device_lib,
)

# (profile name, id, placement starts, placement size, instance count) per NVIDIA's tables.
A100_40GB_TABLE = [
    ("1g.5gb", 19, (0, 1, 2, 3, 4, 5, 6), 1, 7),
    ("1g.5gb+me", 20, (0, 1, 2, 3, 4, 5, 6), 1, 1),
    ("1g.10gb", 15, (0, 2, 4, 6), 2, 4),
    ("2g.10gb", 14, (0, 2, 4), 2, 3),
    ("3g.20gb", 9, (0, 4), 4, 2),
    ("4g.20gb", 5, (0,), 4, 1),
    ("7g.40gb", 0, (0,), 8, 1),
]
NAMES = {
    "A100-40GB": ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
    "A100-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "H100-80GB": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "H200": ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
    "GH200-96GB": ["1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.48gb", "4g.48gb", "7g.96gb"],
    "GB200": ["1g.23gb", "1g.23gb+me", "1g.47gb", "2g.47gb", "3g.93gb", "4g.93gb", "7g.186gb"],
}


def _node(tmp_path: Path, fleet: str) -> FakeDeviceLib:
    lib = open_device_lib(
        DeviceLibConfig(
            backend="fake", node_name="mig", fake_fleet=fleet, fake_state_path=tmp_path / "s.json"
        )
    )
    assert isinstance(lib, FakeDeviceLib)
    return lib


def test_a100_40gb_table_matches_the_user_guide(tmp_path: Path) -> None:
    gpu = _node(tmp_path, "1xA100-40GB").gpus()[0]
    got = [
        (
            p.name,
            p.profile_id,
            tuple(x.start for x in p.placements),
            p.memory_slices,
            p.instance_count,
        )
        for p in gpu.mig_profiles
    ]
    assert got == A100_40GB_TABLE
    assert gpu.mig_profile("1g.5gb").memory_bytes == 4864 * 1024 * 1024
    assert gpu.mig_profile("7g.40gb").multiprocessor_count == 98
    assert gpu.mig_profile("1g.5gb+me").decoder_count == 1
    assert gpu.mig_profile("1g.5gb+me").ofa_count == 1
    assert gpu.mig_profile("1g.5gb").decoder_count == 0


@pytest.mark.parametrize("model", sorted(NAMES))
def test_profile_names_and_geometry_per_model(model: str) -> None:
    specs = GPU_MODELS[model].mig_profiles
    assert [s.name for s in specs] == NAMES[model]
    assert [s.profile_id for s in specs] == [19, 20, 15, 14, 9, 5, 0]
    memory = [s.memory_mib for s in specs]
    assert memory[0] == memory[1]
    assert memory[2] == memory[3]
    assert memory[4] == memory[5]
    assert memory[0] < memory[2] < memory[4] < memory[6] <= GPU_MODELS[model].memory_mib


@pytest.mark.parametrize("model", ["L4", "T4", "V100-16GB"])
def test_parts_without_mig_refuse_it(tmp_path: Path, model: str) -> None:
    lib = _node(tmp_path, f"1x{model}")
    gpu = lib.gpus()[0]
    assert not gpu.mig_capable
    assert gpu.mig_profiles == ()
    with pytest.raises(NotSupportedError) as err:
        lib.set_mig_mode(gpu.uuid, enabled=True)
    assert err.value.operation == "set_mig_mode"
    with pytest.raises(NotSupportedError):
        lib.create_mig_device(gpu.uuid, profile_id=19, placement_start=0)


def test_create_needs_mig_mode(tmp_path: Path) -> None:
    lib = _node(tmp_path, "1xA100-40GB")
    with pytest.raises(InvalidStateError, match="MIG mode is disabled"):
        lib.create_mig_device(lib.gpus()[0].uuid, profile_id=19, placement_start=0)


def test_3g_at_4_over_1g_at_4_fails_like_the_hardware(tmp_path: Path) -> None:
    lib = _node(tmp_path, "1xA100-40GB:mig")
    gpu = lib.gpus()[0].uuid
    lib.create_mig_device(gpu, profile_id=19, placement_start=4)
    with pytest.raises(PlacementConflictError, match=r"overlaps 1g\.5gb at 4:1"):
        lib.create_mig_device(gpu, profile_id=9, placement_start=4)
    # the other half is still free
    assert lib.create_mig_device(gpu, profile_id=9, placement_start=0).placement.size == 4


@pytest.mark.parametrize(("profile_id", "start"), [(9, 2), (14, 6), (5, 4), (0, 1), (19, 7)])
def test_starts_outside_the_table_are_invalid(tmp_path: Path, profile_id: int, start: int) -> None:
    lib = _node(tmp_path, "1xA100-40GB:mig")
    with pytest.raises(InvalidArgumentError, match="valid starts"):
        lib.create_mig_device(lib.gpus()[0].uuid, profile_id=profile_id, placement_start=start)


def test_unknown_profile_is_invalid(tmp_path: Path) -> None:
    lib = _node(tmp_path, "1xA100-40GB:mig")
    with pytest.raises(InvalidArgumentError, match="no GPU instance profile id 42"):
        lib.create_mig_device(lib.gpus()[0].uuid, profile_id=42, placement_start=0)


def test_seven_1g_fill_the_gpu_and_an_eighth_fails(tmp_path: Path) -> None:
    lib = _node(tmp_path, "1xH100-80GB:mig")
    gpu = lib.gpus()[0].uuid
    for start in range(7):
        lib.create_mig_device(gpu, profile_id=19, placement_start=start)
    assert len(lib.gpu(gpu).mig_devices) == 7
    with pytest.raises(InsufficientResourcesError, match="allows 7 instance"):
        lib.create_mig_device(gpu, profile_id=19, placement_start=0)
    # slice 7 is free memory but no compute slice is left
    with pytest.raises(InsufficientResourcesError):
        lib.create_mig_device(gpu, profile_id=15, placement_start=6)


def test_media_extension_profile_is_single(tmp_path: Path) -> None:
    lib = _node(tmp_path, "1xA100-40GB:mig")
    gpu = lib.gpus()[0].uuid
    lib.create_mig_device(gpu, profile_id=20, placement_start=0)
    with pytest.raises(InsufficientResourcesError, match=r"allows 1 instance"):
        lib.create_mig_device(gpu, profile_id=20, placement_start=1)


def test_mixed_layout_4g_2g_1g(tmp_path: Path) -> None:
    lib = _node(tmp_path, "1xA100-80GB:mig")
    gpu = lib.gpus()[0].uuid
    lib.create_mig_device(gpu, profile_id=5, placement_start=0)
    lib.create_mig_device(gpu, profile_id=14, placement_start=4)
    lib.create_mig_device(gpu, profile_id=15, placement_start=6)
    names = [m.profile_name for m in lib.gpu(gpu).mig_devices]
    assert names == ["4g.40gb", "2g.20gb", "1g.20gb"]
    with pytest.raises(InsufficientResourcesError):
        lib.create_mig_device(gpu, profile_id=19, placement_start=6)


def test_disabling_mig_with_devices_is_refused_then_allowed(tmp_path: Path) -> None:
    from dra_nvlib import InUseError

    lib = _node(tmp_path, "1xH100-80GB:mig")
    gpu = lib.gpus()[0].uuid
    dev = lib.create_mig_device(gpu, profile_id=0, placement_start=0)
    with pytest.raises(InUseError):
        lib.set_mig_mode(gpu, enabled=False)
    lib.destroy_mig_device(dev.uuid)
    state = lib.set_mig_mode(gpu, enabled=False)
    assert (state.current, state.pending) == (False, False)


def test_mig_uuid_is_stable_for_the_same_instance(tmp_path: Path) -> None:
    lib = _node(tmp_path, "1xA100-40GB:mig")
    gpu = lib.gpus()[0].uuid
    first = lib.create_mig_device(gpu, profile_id=9, placement_start=4)
    lib.destroy_mig_device(first.uuid)
    again = lib.create_mig_device(gpu, profile_id=9, placement_start=4)
    assert again.uuid == first.uuid


@pytest.mark.parametrize("model", sorted(NAMES))
def test_every_profile_fits_every_listed_placement_on_an_empty_gpu(
    tmp_path: Path, model: str
) -> None:
    lib = _node(tmp_path, f"1x{model}:mig")
    gpu = lib.gpus()[0]
    for profile in gpu.mig_profiles:
        for placement in profile.placements:
            dev = lib.create_mig_device(
                gpu.uuid, profile_id=profile.profile_id, placement_start=placement.start
            )
            assert dev.placement == placement
            assert dev.profile_name == profile.name
            assert dev.memory_bytes == profile.memory_bytes
            lib.destroy_mig_device(dev.uuid)


@pytest.mark.parametrize("model", sorted(NAMES))
def test_full_gpu_instance_excludes_every_other_profile(tmp_path: Path, model: str) -> None:
    lib = _node(tmp_path, f"1x{model}:mig")
    gpu = lib.gpus()[0]
    lib.create_mig_device(gpu.uuid, profile_id=0, placement_start=0)
    for profile in gpu.mig_profiles:
        for placement in profile.placements:
            with pytest.raises(InsufficientResourcesError):
                lib.create_mig_device(
                    gpu.uuid, profile_id=profile.profile_id, placement_start=placement.start
                )
