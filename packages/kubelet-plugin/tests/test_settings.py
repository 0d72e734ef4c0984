"""Flags, their environment twins and defaults, and errors that name the setting."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dra_api_types import nvidia_gates
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_plugin.cli import main
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
        "ADDITIONAL_XIDS_TO_IGNORE": "94, 95",
        "HEALTH_RECOVERY_PERIOD": "2m",
        "NVIDIA_CDI_HOOK_PATH": "/usr/local/nvidia/toolkit/nvidia-cdi-hook",
    }
    s = parse([], env)
    assert s.additional_xids_to_ignore == frozenset({94, 95})
    assert s.health_recovery_period_s == 120.0
    assert (
        parse(["--node-name", "n", "--health-recovery-period", "15"], {}).health_recovery_period_s
        == 15.0
    )
    assert s.nvidia_cdi_hook_path == "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    assert parse(["--node-name", "n"], {}).health_recovery_period_s is None
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
        (
            ["--node-name", "n", "--additional-xids-to-ignore", "48,x"],
            "--additional-xids-to-ignore",
        ),
        (["--node-name", "n", "--health-recovery-period", "-5"], "--health-recovery-period"),
        (["--node-name", "n", "--health-recovery-period", "5d"], "--health-recovery-period"),
        (["--node-name", "n", "--nvidia-cdi-hook-path", "bin/hook"], "--nvidia-cdi-hook-path"),
    ],
)
def test_bad_settings_name_the_setting(argv: list[str], setting: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^{setting}"):
        parse(argv)


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """main() configures process-wide logging; give pytest its handlers back."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def _stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().err.splitlines()]


@pytest.mark.usefixtures("restore_logging")
def test_cli_exits_2_with_the_setting_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--node-name", "n", "--healthcheck-port", "x"]) == 2
    (line,) = _stderr_lines(capsys)
    assert line["setting"] == "--healthcheck-port"
    assert line["event"] == "bad_settings"


@pytest.mark.usefixtures("restore_logging")
def test_unknown_gate_is_one_line_naming_it_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(["--node-name", "n", "--feature-gates", "NVMLDeviceHealthChek=true"])
    assert code == 2
    (line,) = _stderr_lines(capsys)
    assert line["level"] == "error"
    assert line["msg"].startswith("--feature-gates: unknown feature gate 'NVMLDeviceHealthChek'")
    assert "NVMLDeviceHealthCheck" in line["msg"], "the known gates are listed"


# NVIDIA's gates and defaults (pkg/featuregates at main; NodeLocalFabricIPC is newer than
# v0.5.0), and the logging gates its chart documents: what a values file written for NVIDIA's
# chart may set.
NVIDIA_DEFAULTS = {
    "TimeSlicingSettings": False,
    "MPSSupport": False,
    "IMEXDaemonsWithDNSNames": True,
    "PassthroughSupport": False,
    "NVMLDeviceHealthCheck": False,
    "DynamicMIG": False,
    "ComputeDomainCliques": True,
    "CrashOnNVLinkFabricErrors": True,
    "DeviceMetadata": False,
    "FabricManagerPartitioning": False,
    "HostManagedIMEXDaemon": False,
    "NodeLocalFabricIPC": False,
    "DRAListTypeAttributes": False,
    "ConsumableShares": False,
}
LOGGING_DEFAULTS = {
    "ContextualLogging": True,
    "LoggingAlphaOptions": False,
    "LoggingBetaOptions": True,
}


def test_nvidias_gates_and_the_logging_gates_have_nvidias_defaults() -> None:
    s = parse(["--node-name", "n"])
    for name, default in {**NVIDIA_DEFAULTS, **LOGGING_DEFAULTS}.items():
        assert s.gate(name) is default, name
    nvidia = [g for g in nvidia_gates.GATES if g.origin is nvidia_gates.Origin.NVIDIA]
    assert {g.name for g in nvidia} == set(NVIDIA_DEFAULTS)
    assert len({g.name for g in nvidia_gates.GATES}) == len(nvidia_gates.GATES)
    assert s.explicit_gates == frozenset()
    assert s.unimplemented_gates() == {}


@pytest.mark.parametrize("name", sorted(NVIDIA_DEFAULTS) + sorted(LOGGING_DEFAULTS))
def test_every_gate_is_accepted_on_and_off(name: str) -> None:
    requires = [r.other for r in nvidia_gates.RULES if r.gate == name and r.kind == "requires"]
    needed = [f"{other}=true" for other in requires if not nvidia_gates.defaults()[other]]
    on = parse(["--node-name", "n", "--feature-gates", ",".join([f"{name}=true", *needed])])
    assert on.gate(name)
    assert name in on.explicit_gates
    built = {g.name: g.implemented for g in nvidia_gates.GATES}
    # Only the gates not built yet are named as accepted-but-not-implemented.
    assert on.unimplemented_gates().get(name) is (None if built[name] else True)
    # Off, a gate that is on by default and requires it must go off too (NVIDIA's rule).
    dependants = [
        r.gate
        for r in nvidia_gates.RULES
        if r.other == name and r.kind == "requires" and nvidia_gates.defaults()[r.gate]
    ]
    off_text = ",".join([f"{name}=false", *(f"{d}=false" for d in dependants)])
    off = parse(["--node-name", "n", "--feature-gates", off_text])
    assert not off.gate(name)
    gate = {g.name: g for g in nvidia_gates.GATES}[name]
    # A built gate whose off behaviour is not (the IMEX gates) is named when set off.
    assert off.unimplemented_gates().get(name) is (None if gate.built(False) else False)


def test_the_imex_gates_are_built_on_and_named_when_set_off() -> None:
    # Our compute domains always use DNS names and cliques: on is built, off is not.
    for name in ("IMEXDaemonsWithDNSNames", "ComputeDomainCliques"):
        gate = {g.name: g for g in nvidia_gates.GATES}[name]
        assert gate.implemented
        assert gate.built(True)
        assert not gate.built(False)
    s = parse(
        [
            "--node-name",
            "n",
            "--feature-gates",
            "IMEXDaemonsWithDNSNames=false,ComputeDomainCliques=false,HostManagedIMEXDaemon=true",
        ]
    )
    assert s.unimplemented_gates() == {
        "IMEXDaemonsWithDNSNames": False,
        "ComputeDomainCliques": False,
    }


def test_the_sharing_and_passthrough_gates_are_built() -> None:
    built = {g.name for g in nvidia_gates.GATES if g.implemented}
    assert {
        "TimeSlicingSettings",
        "MPSSupport",
        "DynamicMIG",
        "ConsumableShares",
        "PassthroughSupport",
        "DeviceMetadata",
    } <= built


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        (
            "ComputeDomainCliques=true,IMEXDaemonsWithDNSNames=false",
            "ComputeDomainCliques requires",
        ),
        ("DeviceMetadata=true", "DeviceMetadata requires PassthroughSupport=true"),
        ("DynamicMIG=true,PassthroughSupport=true", "DynamicMIG and PassthroughSupport cannot"),
        # component-base's AllAlpha switches on alpha gates NVIDIA's rules keep apart.
        ("AllAlpha=true", "DynamicMIG and PassthroughSupport cannot"),
        ("DynamicMIG=true,MPSSupport=true", "DynamicMIG and MPSSupport cannot"),
        ("PassthroughSupport=true,NVMLDeviceHealthCheck=true", "PassthroughSupport and NVML"),
    ],
)
def test_nvidias_gate_rules_are_enforced(gates: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^--feature-gates: .*{message}"):
        parse(["--node-name", "n", "--feature-gates", gates])


def test_dynamic_mig_with_nvml_health_checks_is_refused_as_by_nvidia() -> None:
    # NVIDIA's ValidateFeatureGates (main, and its TestValidateFeatureGates table): "feature
    # gate DynamicMIG is currently mutually exclusive with NVMLDeviceHealthCheck".
    with pytest.raises(ConfigurationError, match="DynamicMIG and NVMLDeviceHealthCheck cannot"):
        parse(["--node-name", "n", "--feature-gates", "DynamicMIG=true,NVMLDeviceHealthCheck=true"])


@pytest.mark.parametrize(
    ("text", "on", "off"),
    [
        # Every alpha gate on, except those named, in whichever order (component-base).
        (
            "AllAlpha=true,DynamicMIG=false,PassthroughSupport=false,DeviceMetadata=false",
            {"TimeSlicingSettings", "MPSSupport", "NVMLDeviceHealthCheck", "LoggingAlphaOptions"},
            {"DynamicMIG", "PassthroughSupport"},
        ),
        (
            "DynamicMIG=false,PassthroughSupport=false,DeviceMetadata=false,AllAlpha=true",
            {"TimeSlicingSettings", "ConsumableShares"},
            {"DynamicMIG", "DeviceMetadata"},
        ),
        # AllBeta=false turns the beta gates off; the rule between two of them then holds.
        (
            "AllBeta=false",
            set(),
            {
                "IMEXDaemonsWithDNSNames",
                "ComputeDomainCliques",
                "DeviceTaints",
                "LoggingBetaOptions",
            },
        ),
        ("AllBeta=false,DeviceTaints=true", {"DeviceTaints"}, {"DeviceHealthCheck"}),
    ],
)
def test_all_alpha_and_all_beta_set_the_gates_not_named(
    text: str, on: set[str], off: set[str]
) -> None:
    gates = parse(["--node-name", "n", "--feature-gates", text]).feature_gates
    assert {name for name in on if gates[name]} == on
    assert {name for name in off if not gates[name]} == off


def test_rules_only_name_known_gates() -> None:
    names = {g.name for g in nvidia_gates.GATES}
    for rule in nvidia_gates.RULES:
        assert {rule.gate, rule.other} <= names, rule


def test_the_project_gates_stay_on_by_default_and_implemented() -> None:
    own = {g.name: g for g in nvidia_gates.GATES if g.origin is nvidia_gates.Origin.PROJECT}
    assert set(own) == {"DeviceHealthCheck", "DeviceTaints"}
    assert all(g.default and g.implemented for g in own.values())
    s = parse(["--node-name", "n", "--feature-gates", "DeviceTaints=false"])
    assert s.unimplemented_gates() == {}, "an implemented gate is not reported"


@pytest.mark.usefixtures("restore_logging")
def test_unimplemented_gates_are_logged_in_one_line_at_start(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    gates = "LoggingBetaOptions=true,DeviceTaints=true,LoggingAlphaOptions=false"
    # --print-resource-slices starts the plugin up to its first output: no cluster needed.
    code = main(
        [
            "--node-name",
            "n",
            "--device-backend",
            "fake",
            "--fake-gpus",
            "1xL4",
            "--fake-gpu-state-file",
            str(tmp_path / "fake.json"),
            "--feature-gates",
            gates,
            "--print-resource-slices",
        ]
    )
    assert code == 0
    lines = [
        line
        for line in _stderr_lines(capsys)
        if line.get("event") == "feature_gates_not_implemented"
    ]
    (line,) = lines
    assert line["gates"] == {"LoggingBetaOptions": True, "LoggingAlphaOptions": False}
    assert "LoggingBetaOptions=true" in line["msg"]
    assert line["level"] == "warning"
