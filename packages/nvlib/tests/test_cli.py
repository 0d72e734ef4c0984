"""The ``dra-nvlib`` command: listing, nvidia-smi rendering and fault injection from outside."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from dra_nvlib import (
    DeviceLibConfig,
    FakeDeviceLib,
    FakeFabricManager,
    HealthEventKind,
    fake_fabric_manager_path,
    open_device_lib,
)
from dra_nvlib.cli import run


def _args(state: Path) -> list[str]:
    return [
        "--backend",
        "fake",
        "--node",
        "cli",
        "--fleet",
        "2xA100-40GB,1xL4",
        "--state",
        str(state),
    ]


def test_gpus_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([*_args(tmp_path / "s.json"), "gpus"]) == 0
    gpus = json.loads(capsys.readouterr().out)
    assert [g["product_name"] for g in gpus] == ["NVIDIA A100-SXM4-40GB"] * 2 + ["NVIDIA L4"]
    assert gpus[0]["architecture"] == "AMPERE"


def test_nvidia_smi_listing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([*_args(tmp_path / "s.json"), "nvidia-smi", "-L"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("GPU 2: NVIDIA L4 (UUID: GPU-")


def test_fault_injection_reaches_another_process(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    lib = open_device_lib(
        DeviceLibConfig(
            backend="fake", node_name="cli", fake_fleet="2xA100-40GB,1xL4", fake_state_path=state
        )
    )
    assert isinstance(lib, FakeDeviceLib)
    gpu = lib.gpus()[0].uuid
    with lib.watch_health() as watch:
        subprocess.run(
            [sys.executable, "-m", "dra_nvlib", *_args(state), "inject-xid", gpu, "79"],
            check=True,
        )
        event = watch.wait(2.0)
    assert event is not None
    assert (event.kind, event.xid, event.gpu_uuid) == (HealthEventKind.XID, 79, gpu)


def test_errors_are_reported_not_raised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run([*_args(tmp_path / "s.json"), "lose-gpu", "GPU-nope"])
    assert code == 1
    assert "GPU GPU-nope: mark_gpu_lost: no such GPU" in capsys.readouterr().err


def test_set_fabric_models_an_unregistered_and_a_non_mnnvl_fabric(tmp_path: Path) -> None:
    state = tmp_path / "gb.json"
    args = ["--backend", "fake", "--node", "gb", "--fleet", "2xGB200", "--state", str(state)]
    config = DeviceLibConfig(
        backend="fake", node_name="gb", fake_fleet="2xGB200", fake_state_path=state
    )
    with open_device_lib(config) as lib:
        first, second = (g.uuid for g in lib.gpus())
    assert run([*args, "set-fabric", first, "IN_PROGRESS"]) == 0
    zero = "00000000-0000-0000-0000-000000000000"
    assert (
        run([*args, "set-fabric", second, "COMPLETED", "--status", "3", "--cluster-uuid", zero])
        == 0
    )
    with open_device_lib(config) as lib:
        a, b = (g.fabric for g in lib.gpus())
    assert a is not None
    assert a.state.name == "IN_PROGRESS"
    assert b is not None
    assert (b.state.name, b.status, b.cluster_uuid) == ("COMPLETED", 3, zero)


def test_set_fabric_refuses_a_bad_cluster_uuid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "gb.json"
    args = ["--backend", "fake", "--node", "gb", "--fleet", "1xGB200", "--state", str(state)]
    config = DeviceLibConfig(
        backend="fake", node_name="gb", fake_fleet="1xGB200", fake_state_path=state
    )
    with open_device_lib(config) as lib:
        gpu = lib.gpus()[0].uuid
    assert run([*args, "set-fabric", gpu, "COMPLETED", "--cluster-uuid", "nope"]) == 1
    assert "cluster UUID 'nope' is not a UUID" in capsys.readouterr().err


def test_fabric_manager_partitions_of_a_fake_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "s.json"
    args = _args(state)
    # The GPU plugin creates the node's Fabric Manager; before that there is none to show.
    assert run([*args, "fabric-manager", "partitions"]) == 1
    assert "no fake Fabric Manager state" in capsys.readouterr().err
    FakeFabricManager(fake_fabric_manager_path(state), gpu_count=2).activate(1)
    assert run([*args, "fabric-manager", "partitions"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown[0] == {"id": 0, "active": False, "module_ids": [1, 2]}
    assert [p["id"] for p in shown if p["active"]] == [1]
    assert run([*args, "fabric-manager", "stop"]) == 0
    assert run([*args, "fabric-manager", "partitions"]) == 1
    assert "Fabric Manager is stopped" in capsys.readouterr().err
    assert run([*args, "fabric-manager", "start"]) == 0
    assert run([*args, "fabric-manager", "partitions"]) == 0


def test_gpus_carry_their_baseboard_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run([*_args(tmp_path / "s.json"), "gpus"]) == 0
    assert [g["module_id"] for g in json.loads(capsys.readouterr().out)] == [1, 2, 3]
