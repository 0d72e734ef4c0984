"""The compute-domain plugin's settings and the clique ID it reads from the fake fleet."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_computedomain.plugin_backend import open_backend
from dra_computedomain.plugin_cli import (
    PluginSettings,
    build_parser,
    main,
    read_clique_id,
    settings_from_args,
)
from dra_kubelet_core.errors import ConfigurationError
from dra_nvlib.identity import cluster_uuid


def _settings(tmp_path: Path, *args: str) -> PluginSettings:
    parser = build_parser({"NODE_NAME": "node-a"})
    return settings_from_args(
        parser.parse_args(["--kubelet-plugins-directory-path", str(tmp_path), *args])
    )


def test_fake_gb200_nodes_share_a_clique_and_h100s_have_none(tmp_path: Path) -> None:
    gb200 = _settings(tmp_path, "--device-backend=fake", "--fake-gpus=4xGB200")
    clique = read_clique_id(open_backend(gb200, tmp_path / "a").devices, "node-a")
    assert clique == f"{cluster_uuid('fake-nvlink-domain')}.1"
    h100 = _settings(tmp_path, "--device-backend=fake", "--fake-gpus=2xH100-80GB")
    assert read_clique_id(open_backend(h100, tmp_path / "b").devices, "node-a") == ""


def test_bad_settings_name_the_flag(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as err:
        _settings(tmp_path, "--device-backend=cuda")
    assert err.value.setting == "--device-backend"
    with pytest.raises(ConfigurationError) as err:
        _settings(tmp_path, f"--claims-directory={tmp_path}")
    assert err.value.setting == "--claims-directory"
    assert main(["--device-backend=cuda", "--node-name=n"]) == 2


def test_alt_proc_devices_path_from_nvidias_env(tmp_path: Path) -> None:
    parser = build_parser({"NODE_NAME": "node-a", "ALT_PROC_DEVICES_PATH": "/alt-proc-devices"})
    args = parser.parse_args(["--kubelet-plugins-directory-path", str(tmp_path)])
    assert settings_from_args(args).alt_proc_devices == Path("/alt-proc-devices")
    assert _settings(tmp_path).alt_proc_devices is None
    with pytest.raises(ConfigurationError) as err:
        _settings(tmp_path, "--alt-proc-devices-path=relative/devices")
    assert err.value.setting == "--alt-proc-devices-path"


def test_gpu_clique_label_is_off_unless_nvidias_env_says_true(tmp_path: Path) -> None:
    assert _settings(tmp_path).gpu_clique_label is False
    parser = build_parser({"NODE_NAME": "node-a", "GPU_CLIQUE_LABEL_ENABLED": "true"})
    args = parser.parse_args(["--kubelet-plugins-directory-path", str(tmp_path)])
    assert settings_from_args(args).gpu_clique_label is True
    with pytest.raises(ConfigurationError) as err:
        _settings(tmp_path, "--gpu-clique-label-enabled=yes")
    assert err.value.setting == "--gpu-clique-label-enabled"


def test_host_managed_imex_needs_nvidias_gate(tmp_path: Path) -> None:
    assert _settings(tmp_path).host_imex is None
    with pytest.raises(ConfigurationError) as err:
        _settings(tmp_path, "--imex-mode=hostManaged")
    assert err.value.setting == "--imex-mode"
    host = _settings(
        tmp_path,
        "--imex-mode=hostManaged",
        "--feature-gates=HostManagedIMEXDaemon=true",
        "--nvidia-driver-root=/driver-root",
        "--imex-host-socket-path=/run/imex.sock",
    ).host_imex
    assert host is not None
    assert host.query()[:2] == ("chroot", "/driver-root")
    assert host.query()[-1] == "--u=/run/imex.sock"
    with pytest.raises(ConfigurationError) as err:
        _settings(tmp_path, "--imex-isolation=channel")
    assert err.value.setting == "--imex-isolation"


def test_imex_gates_set_off_are_named_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from dra_computedomain.gate_log import log_unbuilt_gates

    test_log = logging.getLogger("cd-test")
    with caplog.at_level(logging.WARNING, logger="cd-test"):
        assert log_unbuilt_gates("HostManagedIMEXDaemon=true", test_log) == {}
        off = "ComputeDomainCliques=false,IMEXDaemonsWithDNSNames=false"
        assert log_unbuilt_gates(off, test_log) == {
            "IMEXDaemonsWithDNSNames": False,
            "ComputeDomainCliques": False,
        }
    (record,) = caplog.records
    assert "IMEXDaemonsWithDNSNames=false" in record.getMessage()
