"""Sharing in the published slices: consumable shares (``--consumable-shares``), dynamic MIG
counters and placements (``DynamicMIG``), static MIG memory slices, and the settings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_api_types import ResourceSlice
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_plugin.inventory import DeviceType, build_inventory
from dra_kubelet_plugin.settings import build_parser, settings_from_args
from dra_kubelet_plugin.slices import SlicePublication, SliceSpec, build_resource_slices
from dra_nvlib import DeviceLibConfig, GpuInfo, open_device_lib
from dra_sharing import ConsumableMode, ConsumableShares

SPEC = SliceSpec(driver_name="gpu.nvidia.com", node_name="n1")


def fake_gpus(tmp_path: Path, fleet: str, *, carve: bool = False) -> tuple[GpuInfo, ...]:
    config = DeviceLibConfig(
        backend="fake", node_name="n1", fake_fleet=fleet, fake_state_path=tmp_path / "f.json"
    )
    with open_device_lib(config) as lib:
        if carve:
            lib.create_mig_device(lib.gpus()[0].uuid, profile_id=9, placement_start=4)
        return lib.gpus()


def _print(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dra_kubelet_plugin",
            "--device-backend",
            "fake",
            "--node-name",
            "n1",
            "--print-resource-slices",
            "--fake-gpu-state-file",
            str(tmp_path / "state.json"),
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    docs = list(yaml.safe_load_all(out.stdout))
    for doc in docs:
        ResourceSlice.from_dict(doc, validate=True)
    return docs


def test_print_with_dynamic_mig_shows_counter_sets_and_placements(tmp_path: Path) -> None:
    docs = _print(tmp_path, "--fake-gpus", "2xA100-40GB,1xL4", "--feature-gates", "DynamicMIG=true")
    # Split layout (1.35+): counters first, then one device slice per GPU.
    assert len(docs) == 4
    assert {d["spec"]["pool"]["resourceSliceCount"] for d in docs} == {4}
    sets = docs[0]["spec"]["sharedCounters"]
    assert [s["name"] for s in sets] == ["gpu-0-counter-set", "gpu-1-counter-set"]
    gpu0 = {d["name"]: d for d in docs[1]["spec"]["devices"]}
    assert len(gpu0) == 1 + 25
    assert gpu0["gpu-0"]["consumesCounters"][0]["counterSet"] == "gpu-0-counter-set"
    mig = gpu0["gpu-0-mig-3g20gb-9-4"]
    assert "uuid" not in mig["attributes"]
    assert mig["attributes"]["profile"] == {"string": "3g.20gb"}
    assert mig["attributes"]["parentUUID"]["string"].startswith("GPU-")
    assert set(mig["consumesCounters"][0]["counters"]) >= {"memory-slice-4", "memory-slice-7"}
    # The L4 cannot do MIG: no counters, no placements (NVIDIA #1092).
    (l4,) = docs[3]["spec"]["devices"]
    assert l4["name"] == "gpu-2"
    assert "consumesCounters" not in l4


def test_combined_layout_for_kubernetes_1_34(tmp_path: Path) -> None:
    devices = build_inventory(fake_gpus(tmp_path, "2xH100-80GB"), dynamic_mig=True)
    slices = build_resource_slices(
        SPEC, devices, generation=1, publication=SlicePublication(split_counters=False)
    )
    assert len(slices) == 2
    for i, s in enumerate(slices):
        assert s["spec"]["sharedCounters"][0]["name"] == f"gpu-{i}-counter-set"
        assert len(s["spec"]["devices"]) == 26
        # 1.34's form: the 1.35+ rules (checked by validate=True) refuse it by design.
        ResourceSlice.from_dict(s)


def test_print_with_consumable_shares_4_shows_shared_gpus(tmp_path: Path) -> None:
    (doc,) = _print(tmp_path, "--fake-gpus", "2xH100-80GB", "--consumable-shares", "4")
    for device in doc["spec"]["devices"]:
        assert device["allowMultipleAllocations"] is True
        assert device["capacity"]["shares"]["value"] == "4"
        assert device["capacity"]["shares"]["requestPolicy"]["default"] == "1"


def test_consumable_memory_mode_on_static_mig(tmp_path: Path) -> None:
    devices = build_inventory(fake_gpus(tmp_path, "1xA100-40GB:mig", carve=True))
    pub = SlicePublication(consumable=ConsumableShares(ConsumableMode.MEMORY))
    (s,) = build_resource_slices(SPEC, devices, generation=1, publication=pub)
    (mig,) = s["spec"]["devices"]
    assert mig["allowMultipleAllocations"] is True
    assert mig["capacity"]["memory"]["requestPolicy"]["default"] == "19968Mi"
    ResourceSlice.from_dict(s, validate=True)


def test_static_mig_publishes_its_memory_slices(tmp_path: Path) -> None:
    devices = build_inventory(fake_gpus(tmp_path, "1xA100-40GB:mig", carve=True))
    (device,) = devices
    assert device.type is DeviceType.MIG
    (s,) = build_resource_slices(SPEC, devices, generation=1)
    cap = s["spec"]["devices"][0]["capacity"]
    assert [k for k in cap if k.startswith("memorySlice")] == [
        "memorySlice4",
        "memorySlice5",
        "memorySlice6",
        "memorySlice7",
    ]


def _settings(*argv: str) -> Any:
    return settings_from_args(build_parser({}).parse_args(["--node-name", "n1", *argv]))


def test_consumable_shares_flag_env_and_gate() -> None:
    assert not _settings().consumable_shares.enabled
    s = _settings("--consumable-shares", "memory")
    assert s.consumable_shares.mode is ConsumableMode.MEMORY
    assert s.gate("ConsumableShares")
    env = settings_from_args(
        build_parser({"CONSUMABLE_SHARES": "8"}).parse_args(["--node-name", "n1"])
    )
    assert env.consumable_shares == ConsumableShares(ConsumableMode.SHARES, 8)


@pytest.mark.parametrize(
    ("argv", "setting", "text"),
    [
        (["--consumable-shares", "lots"], "--consumable-shares", "'lots' is not one of"),
        (
            ["--consumable-shares", "4", "--feature-gates", "ConsumableShares=false"],
            "--consumable-shares",
            "needs the ConsumableShares feature gate",
        ),
    ],
)
def test_consumable_shares_errors_name_the_flag(argv: list[str], setting: str, text: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        _settings(*argv)
    assert info.value.setting == setting
    assert text in str(info.value)
