"""``CrashOnNVLinkFabricErrors`` and the NVLink fabric states, decided as NVIDIA's
compute-domain plugin decides them (``getCliqueIDStrict`` with the gate on, the
``IsFabricAttached`` fallback with it off), on the fake fleet's fabric states."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from dra_computedomain.clique_id import FabricPolicy, node_clique_id
from dra_computedomain.errors import CliqueIdError
from dra_computedomain.plugin_backend import open_backend
from dra_computedomain.plugin_cli import (
    build_parser,
    fabric_policy,
    main,
    read_clique_id,
    settings_from_args,
)
from dra_computedomain.plugin_settings import PluginSettings
from dra_nvlib import DeviceLibConfig, FabricState, FakeDeviceLib, open_device_lib
from dra_nvlib.identity import cluster_uuid

ZERO = "00000000-0000-0000-0000-000000000000"
STRICT = FabricPolicy(crash_on_errors=True)
LENIENT = FabricPolicy(crash_on_errors=False)
PARTITIONED = FabricPolicy(crash_on_errors=True, pending_partition=True)
CLIQUE = f"{cluster_uuid('fake-nvlink-domain')}.1"


def _gb200(tmp_path: Path, count: int = 2) -> FakeDeviceLib:
    lib = open_device_lib(
        DeviceLibConfig(
            backend="fake",
            node_name="gb",
            fake_fleet=f"{count}xGB200",
            fake_state_path=tmp_path / "gb.json",
        )
    )
    assert isinstance(lib, FakeDeviceLib)
    return lib


def _settings(tmp_path: Path, *args: str) -> PluginSettings:
    parser = build_parser({"NODE_NAME": "gb"})
    return settings_from_args(
        parser.parse_args(["--kubelet-plugins-directory-path", str(tmp_path), *args])
    )


@pytest.mark.parametrize("state", [FabricState.NOT_STARTED, FabricState.IN_PROGRESS])
def test_unfinished_registration_refuses_start_with_the_gate_on_and_falls_back_off(
    tmp_path: Path, state: FabricState
) -> None:
    # NVIDIA: "NVLink fabric not attached (device ...): state=N, refusing to start"
    with contextlib.closing(_gb200(tmp_path)) as lib:
        gpu = lib.gpus()[1].uuid
        lib.set_fabric_state(gpu, state)
        with pytest.raises(CliqueIdError) as err:
            node_clique_id("gb", lib.gpus(), STRICT)
        assert gpu in str(err.value)
        assert state.name in str(err.value)
        assert "refusing to start" in str(err.value)
        # Off: the unattached GPU does not count; the other still names the clique.
        assert node_clique_id("gb", lib.gpus(), LENIENT) == CLIQUE
        lib.set_fabric_state(lib.gpus()[0].uuid, state)
        assert node_clique_id("gb", lib.gpus(), LENIENT) == ""


def test_a_registration_error_refuses_start_with_the_gate_on_and_falls_back_off(
    tmp_path: Path,
) -> None:
    with contextlib.closing(_gb200(tmp_path, count=1)) as lib:
        gpu = lib.gpus()[0].uuid
        lib.set_fabric_state(gpu, FabricState.COMPLETED, status=999)
        with pytest.raises(CliqueIdError, match=r"registration error: status 999"):
            node_clique_id("gb", lib.gpus(), STRICT)
        assert node_clique_id("gb", lib.gpus(), LENIENT) == ""


def test_a_zero_cluster_uuid_is_no_clique_in_both_modes(tmp_path: Path) -> None:
    # NVLink-capable but not multi-node NVLink: no clique, not an error.
    with contextlib.closing(_gb200(tmp_path)) as lib:
        for gpu in lib.gpus():
            lib.set_fabric_state(gpu.uuid, FabricState.COMPLETED, cluster_uuid=ZERO)
        assert node_clique_id("gb", lib.gpus(), STRICT) == ""
        assert node_clique_id("gb", lib.gpus(), LENIENT) == ""


def test_a_zero_cluster_uuid_does_not_hide_an_unfinished_registration_when_strict(
    tmp_path: Path,
) -> None:
    # NVIDIA checks the state before the cluster UUID.
    with contextlib.closing(_gb200(tmp_path, count=1)) as lib:
        gpu = lib.gpus()[0].uuid
        lib.set_fabric_state(gpu, FabricState.IN_PROGRESS, cluster_uuid=ZERO)
        with pytest.raises(CliqueIdError):
            node_clique_id("gb", lib.gpus(), STRICT)


def test_a_not_supported_fabric_is_no_clique_in_both_modes(tmp_path: Path) -> None:
    with contextlib.closing(_gb200(tmp_path, count=1)) as lib:
        lib.set_fabric_state(lib.gpus()[0].uuid, FabricState.NOT_SUPPORTED)
        assert node_clique_id("gb", lib.gpus(), STRICT) == ""
        assert node_clique_id("gb", lib.gpus(), LENIENT) == ""


def test_fabric_manager_partitioning_on_an_nvswitch_node_tolerates_pending_registration(
    tmp_path: Path,
) -> None:
    # NVIDIA: with FabricManagerPartitioning on a single-node NVLink system, GPUs register
    # only when their partition is activated, so an unfinished registration is skipped.
    with contextlib.closing(_gb200(tmp_path)) as lib:
        gpu = lib.gpus()[0].uuid
        lib.set_fabric_state(gpu, FabricState.IN_PROGRESS)
        assert node_clique_id("gb", lib.gpus(), PARTITIONED) == CLIQUE
        # A registration error is still an error.
        lib.set_fabric_state(gpu, FabricState.COMPLETED, status=3)
        with pytest.raises(CliqueIdError):
            node_clique_id("gb", lib.gpus(), PARTITIONED)


def test_gates_reach_the_policy_and_the_nvswitch_check_needs_fabric_manager_partitioning(
    tmp_path: Path,
) -> None:
    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia-nvswitch" / "devices" / "0000:05:00.0").mkdir(parents=True)
    default = _settings(tmp_path, "--device-backend=fake", "--fake-gpus=2xGB200")
    assert default.crash_on_fabric_errors
    assert not default.fabric_manager_partitioning
    devices = open_backend(default, tmp_path / "a").devices
    assert fabric_policy(default, devices) == STRICT
    off = _settings(
        tmp_path,
        "--device-backend=fake",
        "--fake-gpus=2xGB200",
        "--feature-gates=CrashOnNVLinkFabricErrors=false",
    )
    assert fabric_policy(off, open_backend(off, tmp_path / "b").devices) == LENIENT
    fm = _settings(
        tmp_path,
        "--device-backend=fake",
        "--fake-gpus=2xGB200",
        f"--proc-root={proc}",
        "--feature-gates=FabricManagerPartitioning=true",
    )
    assert fabric_policy(fm, open_backend(fm, tmp_path / "c").devices) == PARTITIONED
    no_switch = _settings(
        tmp_path,
        "--device-backend=fake",
        "--fake-gpus=2xGB200",
        f"--proc-root={tmp_path / 'empty'}",
        "--feature-gates=FabricManagerPartitioning=true",
    )
    assert fabric_policy(no_switch, open_backend(no_switch, tmp_path / "d").devices) == STRICT


def test_read_clique_id_in_a_fresh_process_applies_the_policy(tmp_path: Path) -> None:
    with contextlib.closing(_gb200(tmp_path)) as lib:
        lib.set_fabric_state(lib.gpus()[0].uuid, FabricState.NOT_STARTED)
    config = DeviceLibConfig(
        backend="fake", node_name="gb", fake_fleet="2xGB200", fake_state_path=tmp_path / "gb.json"
    )
    with pytest.raises(CliqueIdError):
        read_clique_id(config, "gb", STRICT)
    assert read_clique_id(config, "gb", LENIENT) == CLIQUE


def test_the_plugin_exits_1_on_a_fabric_error_with_the_gate_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state" / "gb.json"
    config = DeviceLibConfig(
        backend="fake", node_name="gb", fake_fleet="2xGB200", fake_state_path=state
    )
    with open_device_lib(config) as lib:
        assert isinstance(lib, FakeDeviceLib)
        lib.set_fabric_state(lib.gpus()[0].uuid, FabricState.IN_PROGRESS)
    code = main(
        [
            "--node-name=gb",
            f"--kubelet-plugins-directory-path={tmp_path / 'plugins'}",
            f"--kubelet-registrar-directory-path={tmp_path / 'registry'}",
            f"--cdi-root={tmp_path / 'cdi'}",
            "--device-backend=fake",
            "--fake-gpus=2xGB200",
            f"--fake-gpu-state-file={state}",
        ]
    )
    assert code == 1
    fatal = [json.loads(line) for line in capsys.readouterr().err.splitlines() if '"fatal"' in line]
    assert [f["error_type"] for f in fatal] == ["CliqueIdError"]
    assert "state IN_PROGRESS" in fatal[0]["msg"]
    assert "refusing to start" in fatal[0]["msg"]
