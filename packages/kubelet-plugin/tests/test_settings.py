"""Flags, their environment twins and defaults, and errors that name the setting."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from dra_kubelet_plugin.cli import main
from dra_kubelet_plugin.errors import ConfigurationError
from dra_kubelet_plugin.settings import Settings, build_parser, flag_table, settings_from_args


def parse(argv: list[str], env: dict[str, str] | None = None) -> Settings:
    return settings_from_args(build_parser(env or {}).parse_args(argv))


def test_defaults_are_the_documented_ones() -> None:
    s = parse(["--node-name", "n1"])
    assert s.cdi_root == Path("/var/run/cdi")
    assert s.registrar_dir == Path("/var/lib/kubelet/plugins_registry")
    assert s.plugins_dir == Path("/var/lib/kubelet/plugins")
    assert s.plugin_dir == Path("/var/lib/kubelet/plugins/gpu.nvidia.com")
    assert s.driver_root == Path("/")
    assert s.device_backend == "nvml"
    assert s.healthcheck_port == -1
    assert s.http_endpoint == ""
    assert s.gate("DeviceHealthCheck")
    assert s.gate("DeviceTaints")
    assert s.pod_uid == ""


def test_every_flag_has_an_environment_twin_that_sets_it() -> None:
    env = {
        "NODE_NAME": "from-env",
        "CDI_ROOT": "/run/cdi-x",
        "DEVICE_BACKEND": "fake",
        "FAKE_GPUS": "2xL4",
        "HEALTHCHECK_PORT": "51515",
        "HTTP_ENDPOINT": ":8080",
        "FEATURE_GATES": "DeviceTaints=false",
        "POD_UID": "abc",
        "LOG_VERBOSITY": "4",
        "NVIDIA_DRIVER_ROOT": "/run/nvidia/driver",
    }
    s = parse([], env)
    assert (s.node_name, s.cdi_root, s.device_backend, s.fake_gpus) == (
        "from-env",
        Path("/run/cdi-x"),
        "fake",
        "2xL4",
    )
    assert (s.healthcheck_port, s.http_endpoint, s.pod_uid, s.verbosity) == (
        51515,
        ":8080",
        "abc",
        4,
    )
    assert not s.gate("DeviceTaints")
    assert s.driver_root == Path("/run/nvidia/driver")
    assert parse(["--node-name", "flag-wins"], env).node_name == "flag-wins"
    assert len({env for _, env, _, _ in flag_table()}) == len(flag_table())


@pytest.mark.parametrize(
    ("argv", "setting"),
    [
        ([], "--node-name"),
        (["--node-name", "n", "--device-backend", "cuda"], "--device-backend"),
        (["--node-name", "n", "--device-backend", "fake"], "--fake-gpus"),
        (["--node-name", "n", "--healthcheck-port", "70000"], "--healthcheck-port"),
        (["--node-name", "n", "--feature-gates", "Nope=true"], "--feature-gates"),
        (["--node-name", "n", "--feature-gates", "DeviceTaints"], "--feature-gates"),
        (["--node-name", "n", "--cdi-root", "relative/cdi"], "--cdi-root"),
        (["--node-name", "n", "--http-endpoint", "8080"], "--http-endpoint"),
        (["--node-name", "n", "--device-refresh-interval", "0"], "--device-refresh-interval"),
    ],
)
def test_bad_settings_name_the_setting(argv: list[str], setting: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^{setting}"):
        parse(argv)


def test_cli_exits_2_with_the_setting_named(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        with pytest.raises(SystemExit) as exc:
            main(["--node-name", "n", "--healthcheck-port", "x"])
    finally:  # main() configures process-wide logging; give pytest its handlers back
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    assert exc.value.code == 2
    assert "--healthcheck-port" in capsys.readouterr().err
