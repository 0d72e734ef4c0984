"""Static MIG layouts in fleet specs (``2xGH200-96GB:mig=7x1g.12gb``) and the GH200 96GB part
that NVIDIA's ``extended-resources_mig-1g-12gb.yaml`` describes (2 GPUs, 7x 1g.12gb each)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dra_nvlib import (
    GPU_MODELS,
    DeviceLibConfig,
    FakeDeviceLib,
    FleetSpecError,
    load_fleet_spec,
    open_device_lib,
    parse_fleet_string,
)
from dra_nvlib.cli import run
from dra_nvlib.mig_layout import MigLayoutError, MigLayoutItem, parse_mig_layout, plan_layout

SPEC_FLEET = "2xGH200-96GB:mig=7x1g.12gb"
# `nvidia-smi -L` as the spec's comment shows it, UUIDs aside.
GPU_LINE = re.compile(r"^GPU (\d): NVIDIA GH200 96GB HBM3 \(UUID: GPU-[0-9a-f-]{36}\)$")
MIG_LINE = re.compile(r"^  MIG 1g\.12gb     Device  (\d): \(UUID: MIG-[0-9a-f-]{36}\)$")


def _node(tmp_path: Path, fleet: str) -> FakeDeviceLib:
    lib = open_device_lib(
        DeviceLibConfig(
            backend="fake", node_name="gh", fake_fleet=fleet, fake_state_path=tmp_path / "s.json"
        )
    )
    assert isinstance(lib, FakeDeviceLib)
    return lib


def test_gh200_96gb_is_the_part_nvml_reports() -> None:
    model = GPU_MODELS["GH200-96GB"]
    assert model.product_name == "NVIDIA GH200 96GB HBM3"
    assert model.architecture.display_name == "Hopper"
    assert str(model.compute_capability) == "9.0"
    assert model.memory_mib == 97871
    assert model.pci_device_id == 0x234210DE
    rows = [
        (s.name, s.profile_id, s.slice_count, s.memory_slices, s.instance_count, s.memory_mib)
        for s in model.mig_profiles
    ]
    assert rows == [
        ("1g.12gb", 19, 1, 1, 7, 11264),
        ("1g.12gb+me", 20, 1, 1, 1, 11264),
        ("1g.24gb", 15, 1, 2, 4, 23552),
        ("2g.24gb", 14, 2, 2, 3, 23552),
        ("3g.48gb", 9, 3, 4, 2, 47616),
        ("4g.48gb", 5, 4, 4, 1, 47616),
        ("7g.96gb", 0, 7, 8, 1, 95232),
    ]
    starts = {s.name: s.placement_starts for s in model.mig_profiles}
    assert starts["1g.12gb"] == (0, 1, 2, 3, 4, 5, 6)
    assert starts["1g.24gb"] == (0, 2, 4, 6)
    assert starts["3g.48gb"] == (0, 4)
    assert parse_fleet_string("1xGH200").entries[0].model is model


def test_spec_layout_boots_with_seven_1g_12gb_per_gpu(tmp_path: Path) -> None:
    gpus = _node(tmp_path, SPEC_FLEET).gpus()
    assert len(gpus) == 2
    for gpu in gpus:
        assert gpu.mig_mode.current
        assert gpu.mig_mode.pending
        migs = gpu.mig_devices
        assert [m.profile_name for m in migs] == ["1g.12gb"] * 7
        assert sorted(m.placement.start for m in migs) == list(range(7))
        assert {m.memory_bytes for m in migs} == {11264 * 1024 * 1024}
        assert len({m.uuid for m in migs}) == 7


def test_fake_nvidia_smi_lists_the_spec_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--backend", "fake", "--node", "gh", "--fleet", SPEC_FLEET]
    assert run([*args, "--state", str(tmp_path / "s.json"), "nvidia-smi", "-L"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 16
    for gpu in (0, 1):
        block = lines[gpu * 8 : gpu * 8 + 8]
        head = GPU_LINE.match(block[0])
        assert head is not None, block[0]
        assert head.group(1) == str(gpu)
        devices = [MIG_LINE.match(line) for line in block[1:]]
        assert all(devices), block
        assert [m.group(1) for m in devices if m] == [str(i) for i in range(7)]


def test_layout_is_stable_across_restarts(tmp_path: Path) -> None:
    first = [m.uuid for g in _node(tmp_path, SPEC_FLEET).gpus() for m in g.mig_devices]
    again = [m.uuid for g in _node(tmp_path, SPEC_FLEET).gpus() for m in g.mig_devices]
    assert first == again


def test_mixed_layout_places_large_profiles_first() -> None:
    plan = plan_layout(GPU_MODELS["GH200-96GB"], parse_mig_layout("1g.12gb/2g.24gb/4g.48gb"))
    assert [(p.profile_id, p.start) for p in plan] == [(5, 0), (14, 4), (19, 6)]


def test_layout_has_one_canonical_spelling() -> None:
    a = parse_fleet_string("2 x gh200:mig=7x1g.12gb")
    b = parse_fleet_string("2xGH200-96GB:mig=3x1g.12gb/4x1g.12gb")
    assert a.source == b.source == SPEC_FLEET
    assert a.entries[0].mig_layout == (MigLayoutItem("1g.12gb", 7),)


def test_yaml_mig_devices_is_mig_parteds_mapping(tmp_path: Path) -> None:
    path = tmp_path / "node.yaml"
    path.write_text("gpus:\n  - model: GH200-96GB\n    count: 2\n    mig_devices: {1g.12gb: 7}\n")
    entry = load_fleet_spec(str(path)).entries[0]
    assert entry.mig_enabled
    assert len(entry.mig_instances) == 7


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("1xGH200-96GB:mig=8x1g.12gb", "allows 7 instance"),
        ("1xGH200-96GB:mig=1g.10gb", "has no MIG profile '1g.10gb'"),
        ("1xGH200-96GB:mig=7g.96gb/1g.12gb", "overlaps 7g.96gb"),
        ("1xGH200-96GB:mig=4g.48gb/3g.48gb/1g.12gb", "overlaps 3g.48gb at 4:4"),
        ("1xGH200-96GB:mig=seven", "is not \\[COUNTx\\]PROFILE"),
        ("1xL4:mig=1g.12gb", "has no MIG"),
    ],
)
def test_layouts_the_hardware_refuses_are_fleet_errors(spec: str, needle: str) -> None:
    with pytest.raises(FleetSpecError, match=needle):
        parse_fleet_string(spec)


def test_zero_count_is_refused() -> None:
    with pytest.raises(MigLayoutError, match="at least 1"):
        parse_mig_layout("0x1g.12gb")
