"""NVIDIA's chart values accepted with NVIDIA's meaning: the values file verbatim, every feature
gate (one table with the plugin), NVIDIA's probes, prestart check and node affinity."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import CHART, OWN_IMAGE, HelmFailed, daemonset, gpus_container, plugin_pod
from chart_render import NVIDIA_VALUES, render_notes, render_objects
from dra_api_types import nvidia_gates
from dra_api_types.feature_gates import SPECIAL_GATES

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
NOT_IMPLEMENTED = "Accepted but not implemented yet"


def _leaves(node: Any, path: str = "") -> list[str]:
    if isinstance(node, dict) and node:
        return [leaf for key, child in node.items() for leaf in _leaves(child, f"{path}.{key}")]
    return [path.lstrip(".")]


def _schema_at(path: str) -> dict[str, Any]:
    sch: dict[str, Any] = SCHEMA
    for key in path.split("."):
        if "$ref" in sch:
            sch = SCHEMA["definitions"][sch["$ref"].rsplit("/", 1)[-1]]
        types = sch.get("type")
        if (
            "object" in (types if isinstance(types, list) else [types])
            and "properties" not in sch
            and "additionalProperties" not in sch
        ):
            return sch  # a free-form Kubernetes object (affinity, securityContext, ...)
        props = sch.get("properties", {})
        if key in props:
            sch = props[key]
        elif isinstance(sch.get("additionalProperties"), dict):
            sch = sch["additionalProperties"]
        else:
            raise KeyError(path)
    return sch


# --- NVIDIA's values file -------------------------------------------------------------------


def test_every_key_of_nvidias_values_is_in_the_schema() -> None:
    nvidia = yaml.safe_load(NVIDIA_VALUES.read_text())
    missing = []
    for leaf in _leaves(nvidia):
        try:
            _schema_at(leaf)
        except KeyError:
            missing.append(leaf)
    assert not missing, f"NVIDIA values the schema rejects: {missing}"


def test_nvidias_values_verbatim_pass_the_schema_and_hit_nvidias_own_guard(helm: Path) -> None:
    # NVIDIA's file leaves gpuResourcesEnabledOverride false: NVIDIA's chart refuses it with the
    # same guard, so that is the only error, and no schema error comes first.
    with pytest.raises(HelmFailed) as err:
        render_objects(helm, values=[NVIDIA_VALUES], base=False)
    assert "values don't meet the specifications of the schema" not in str(err.value)
    assert "resources.gpus.enabled=true requires --set gpuResourcesEnabledOverride=true" in str(
        err.value
    )


def test_nvidias_values_render_with_nvidias_meaning(helm: Path) -> None:
    nvidia = yaml.safe_load(NVIDIA_VALUES.read_text())
    # Moving from NVIDIA's chart: the same values file, and this driver's image.
    objects = render_objects(helm, {"image.repository": OWN_IMAGE}, values=[NVIDIA_VALUES])
    classes = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "DeviceClass")
    assert len(classes) == 5, "gpus and computeDomains are both enabled in NVIDIA's values"
    pod = plugin_pod(objects)
    assert pod["affinity"] == nvidia["kubeletPlugin"]["affinity"]
    assert pod["tolerations"] == nvidia["kubeletPlugin"]["tolerations"]
    assert pod["priorityClassName"] == "system-node-critical"
    gpus = gpus_container(objects)
    assert gpus["image"] == f"{OWN_IMAGE}:0.1.0"
    assert gpus["securityContext"] == {"privileged": True}
    assert "--http-endpoint=:8080" in gpus["args"]
    assert "--metrics-path=/metrics" in gpus["args"]
    assert "-v=4" in gpus["args"]
    assert gpus["startupProbe"]["grpc"]["port"] == 51516
    (init,) = pod["initContainers"]
    assert init["name"] == "init"
    (cd,) = [c for c in pod["containers"] if c["name"] == "compute-domains"]
    assert cd["securityContext"] == {"privileged": True}
    assert "--http-endpoint=:8081" in cd["args"]
    # Missing IMEX channel nodes are made on the host's /dev, where the runtime looks.
    assert "--dev-root=/host-dev-root" in cd["args"]
    (dev,) = [m for m in cd["volumeMounts"] if m["mountPath"] == "/host-dev-root/dev"]
    (vol,) = [v for v in pod["volumes"] if v["name"] == dev["name"]]
    assert vol["hostPath"]["path"] == "/dev"
    assert cd["startupProbe"]["grpc"]["port"] == 51515
    # NVIDIA's controller.* configures the compute-domain controller; the allocation
    # controller (allocationController.*, on by default) is this chart's own.
    assert sorted(o["metadata"]["name"] for o in objects if o["kind"] == "Deployment") == [
        "dra-dra-driver-nvidia-gpu-allocation-controller",
        "dra-dra-driver-nvidia-gpu-compute-domain-controller",
    ]
    notes = render_notes(helm, {"image.repository": OWN_IMAGE}, values=[NVIDIA_VALUES])
    assert NOT_IMPLEMENTED not in notes, "NVIDIA's defaults configure only built parts"
    assert "compute-domain controller" in notes
    assert "webhook" not in notes, "NVIDIA's values leave the webhook off"


@pytest.mark.parametrize(
    ("key", "value", "listed"),
    [
        ("nvidiaCDIHookPath", "/usr/local/nvidia/toolkit/nvidia-cdi-hook", None),
        ("altProcDevices", "/var/lib/nvml-mock/imex/proc-devices", None),
        ("consumableShares", "memory", None),
        ("consumableShares", "8", None),
        ("kubeletPlugin.networkPolicy.enabled", "true", "kubeletPlugin.networkPolicy.enabled"),
        ("controller.networkPolicy.enabled", "true", "controller.networkPolicy.enabled"),
        ("kubeletPlugin.metrics.metricsPath", "/prom", None),
        ("webhook.enabled", "true", None),
        ("controller.leaderElection.enabled", "true", None),
        ("webhook.tls.mode", "secret", None),
        ("kubeletPlugin.containers.computeDomains.gpuCliqueLabelEnabled", "true", None),
    ],
)
def test_values_of_parts_not_built_are_accepted_and_listed(
    helm: Path, key: str, value: str, listed: str | None
) -> None:
    render_objects(helm, {key: value})
    notes = render_notes(helm, {key: value})
    if listed is None:  # configures a part that is only listed when switched on
        assert NOT_IMPLEMENTED not in notes
    else:
        assert NOT_IMPLEMENTED in notes
        assert f"  - {listed}" in notes


def test_imex_gates_set_off_are_listed_as_not_built(helm: Path) -> None:
    # Our compute domains always use DNS names and cliques: off is accepted, and said to be so.
    sets = {
        "featureGates.IMEXDaemonsWithDNSNames": "false",
        "featureGates.ComputeDomainCliques": "false",
    }
    render_objects(helm, sets)
    notes = render_notes(helm, sets)
    assert NOT_IMPLEMENTED in notes
    for gate in ("IMEXDaemonsWithDNSNames", "ComputeDomainCliques"):
        assert f"  - featureGates.{gate}=false" in notes
    on = dict.fromkeys(sets, "true")
    assert NOT_IMPLEMENTED not in render_notes(helm, on)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


@pytest.mark.parametrize("backend", ["nvml", "fake"])
def test_host_managed_imex_as_nvidia(helm: Path, backend: str) -> None:
    host = {
        "resources.computeDomains.enabled": "true",
        "resources.computeDomains.imex.mode": "hostManaged",
        "devices.backend": backend,
    }
    # NVIDIA's rule: the mode needs its gate.
    with pytest.raises(HelmFailed, match=r"requires featureGates\.HostManagedIMEXDaemon=true"):
        render_objects(helm, host)
    sets = {**host, "featureGates.HostManagedIMEXDaemon": "true"}
    objects = render_objects(helm, sets)
    # The controller still runs (it makes the workload templates), told the mode.
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    (controller,) = [d for d in deployments if "compute-domain" in d["metadata"]["name"]]
    env = _env(controller["spec"]["template"]["spec"]["containers"][0])
    assert env["IMEX_MODE"] == "hostManaged"
    assert env["IMEX_ISOLATION"] == "domain"
    assert env["FEATURE_GATES"] == "HostManagedIMEXDaemon=true"
    # No domain daemons: no daemon service account or role.
    names = {o["metadata"]["name"] for o in objects}
    assert "compute-domain-daemon-service-account" not in names
    pod = plugin_pod(objects)
    (cd,) = [c for c in pod["containers"] if c["name"] == "compute-domains"]
    env = _env(cd)
    assert env["IMEX_MODE"] == "hostManaged"
    assert env["IMEX_HOST_SOCKET_PATH"] == "/etc/nvidia-imex/imex_ctrl.sock"
    mounts = {m["mountPath"] for m in cd["volumeMounts"]}
    if backend == "fake":  # the stand-in's socket directory, at the same path
        assert "/etc/nvidia-imex" in mounts
        (vol,) = [v for v in pod["volumes"] if v["name"] == "host-imex-socket"]
        assert vol["hostPath"]["path"] == "/etc/nvidia-imex"
    else:  # nvidia-imex-ctl runs chrooted into the driver root
        assert "/driver-root" in mounts
        assert "/etc/nvidia-imex" not in mounts
    assert NOT_IMPLEMENTED not in render_notes(helm, sets)
    # The default mode: daemons and their account.
    default = {"resources.computeDomains.enabled": "true", "devices.backend": backend}
    names = {o["metadata"]["name"] for o in render_objects(helm, default)}
    assert "compute-domain-daemon-service-account" in names


def test_channel_isolation_is_refused_as_nvidia_does(helm: Path) -> None:
    with pytest.raises(HelmFailed, match="isolation=channel is not supported"):
        render_objects(
            helm,
            {
                "resources.computeDomains.enabled": "true",
                "resources.computeDomains.imex.isolation": "channel",
            },
        )


def test_a_default_install_lists_nothing_as_not_implemented(helm: Path) -> None:
    assert NOT_IMPLEMENTED not in render_notes(helm)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("webhook.enable", "true", "'enable' not allowed"),
        ("webhook.failurePolicy", "Sometimes", "/webhook/failurePolicy"),
        ("webhook.tls.mode", "certmanager", "/webhook/tls/mode"),
        ("controller.replica", "2", "'replica' not allowed"),
        ("controller.leaderElection.leaseDuration", "soon", "/controller/leaderElection"),
        ("resources.computeDomains.imex.mod", "hostManaged", "'mod' not allowed"),
        ("resources.computeDomains.imex.mode", "host", "/resources/computeDomains/imex/mode"),
        ("kubeletPlugin.containers.inits.resources.foo", "1", "'inits' not allowed"),
        ("consumableShares", "lots", "/consumableShares"),
        ("featureGates.NVMLDeviceHealthChek", "true", "'NVMLDeviceHealthChek' not allowed"),
        ("featureGates.MPSSupport", "maybe", "/featureGates/MPSSupport"),
        ("namespace", "gpu", "'namespace' not allowed"),
    ],
)
def test_typos_in_nvidias_keys_are_still_rejected(
    helm: Path, key: str, value: str, message: str
) -> None:
    with pytest.raises(HelmFailed) as err:
        render_objects(helm, {key: value})
    assert "values don't meet the specifications of the schema" in str(err.value)
    assert message in str(err.value)


# --- feature gates: one table ---------------------------------------------------------------


def _chart_gate_table() -> dict[str, Any]:
    text = (CHART / "templates" / "_helpers.tpl").read_text()
    m = re.search(
        r'\{\{- define "dra-driver-nvidia-gpu.gateTable" -\}\}\n(.*?)\n\{\{- end \}\}', text, re.S
    )
    assert m, "_helpers.tpl defines the gate table"
    return dict(json.loads(m.group(1)))


def test_the_schema_and_the_chart_list_the_plugins_gates() -> None:
    expected = {g.name: (g.default, g.implemented) for g in nvidia_gates.GATES}
    schema_gates = SCHEMA["properties"]["featureGates"]
    assert schema_gates["additionalProperties"] is False
    listed = dict(schema_gates["properties"])
    # component-base's AllAlpha/AllBeta: no default of their own.
    for special in SPECIAL_GATES:
        assert "default" not in listed.pop(special)
    assert {k: v["default"] for k, v in listed.items()} == {
        k: default for k, (default, _) in expected.items()
    }
    assert all(v["type"] == "boolean" for v in schema_gates["properties"].values())
    for gate in nvidia_gates.GATES:
        described = schema_gates["properties"][gate.name]["description"]
        assert described.startswith(f"{gate.maturity}, {gate.origin}: "), gate.name
        assert described.endswith("(accepted, not implemented yet)") is not gate.implemented
    table = _chart_gate_table()
    assert {k: (v["default"], v["implemented"]) for k, v in table["gates"].items()} == expected
    assert {k: v["maturity"] for k, v in table["gates"].items()} == {
        g.name: str(g.maturity) for g in nvidia_gates.GATES
    }
    assert {k: v.get("offImplemented", True) for k, v in table["gates"].items()} == {
        g.name: g.off_built for g in nvidia_gates.GATES
    }
    assert table["rules"] == [
        {"gate": r.gate, "kind": str(r.kind), "other": r.other} for r in nvidia_gates.RULES
    ]


def test_all_alpha_is_refused_at_install_by_nvidias_rules_and_passed_on_otherwise(
    helm: Path,
) -> None:
    # AllAlpha=true switches on DynamicMIG and PassthroughSupport, which exclude each other.
    with pytest.raises(HelmFailed, match=r"DynamicMIG.*PassthroughSupport"):
        render_objects(helm, {"featureGates.AllAlpha": "true"})
    sets = {
        "featureGates.AllAlpha": "true",
        "featureGates.DynamicMIG": "false",
        "featureGates.PassthroughSupport": "false",
        "featureGates.DeviceMetadata": "false",
    }
    args = gpus_container(render_objects(helm, sets))["args"]
    (flag,) = [a for a in args if a.startswith("--feature-gates=")]
    assert "AllAlpha=true" in flag.removeprefix("--feature-gates=").split(",")
    # The gates AllAlpha switched on that nothing acts on yet are not listed by name in NOTES
    # (the plugin's start log names them); AllAlpha itself is no gate of the table.
    assert "featureGates.AllAlpha" not in render_notes(helm, sets)


def test_values_yaml_documents_the_gates_nvidias_chart_names() -> None:
    # NVIDIA's values.yaml names these in its featureGates comment; all must be known here.
    named = re.findall(r"^#\s+(\w+): (?:true|false)", NVIDIA_VALUES.read_text(), re.M)
    assert "NVMLDeviceHealthCheck" in named
    known = {g.name for g in nvidia_gates.GATES}
    assert set(named) - {"ExampleFeature"} <= known


def _required_by_default_off(name: str) -> list[str]:
    defaults = nvidia_gates.defaults()
    return [
        r.other
        for r in nvidia_gates.RULES
        if r.gate == name and r.kind is nvidia_gates.RuleKind.REQUIRES and not defaults[r.other]
    ]


@pytest.mark.parametrize("gate", [g.name for g in nvidia_gates.GATES])
def test_every_feature_gate_on_alone(helm: Path, gate: str) -> None:
    needed = _required_by_default_off(gate)
    if needed:
        # NVIDIA's rule: the gate alone is refused at install, naming what it needs.
        with pytest.raises(HelmFailed, match=rf"featureGates\.{gate} requires featureGates\."):
            render_objects(helm, {f"featureGates.{gate}": "true"})
    sets = {f"featureGates.{name}": "true" for name in [gate, *needed]}
    for backend in ("nvml", "fake"):
        args = gpus_container(render_objects(helm, {**sets, "devices.backend": backend}))["args"]
        (flag,) = [a for a in args if a.startswith("--feature-gates=")]
        assert f"{gate}=true" in flag.removeprefix("--feature-gates=").split(",")
    notes = render_notes(helm, sets)
    implemented = {g.name: g.implemented for g in nvidia_gates.GATES}[gate]
    assert (f"featureGates.{gate}=true" in notes) is not implemented


@pytest.mark.parametrize("rule", nvidia_gates.RULES, ids=str)
def test_nvidias_gate_rules_fail_the_install(helm: Path, rule: nvidia_gates.GateRule) -> None:
    sets = {f"featureGates.{rule.gate}": "true"}
    sets[f"featureGates.{rule.other}"] = (
        "false" if rule.kind is nvidia_gates.RuleKind.REQUIRES else "true"
    )
    expected = (
        f"featureGates.{rule.gate} requires featureGates.{rule.other}=true"
        if rule.kind is nvidia_gates.RuleKind.REQUIRES
        else f"featureGates.{rule.gate} and featureGates.{rule.other} cannot both be enabled"
    )
    with pytest.raises(HelmFailed) as err:
        render_objects(helm, sets)
    assert expected in str(err.value)


# --- probes, prestart, affinity -------------------------------------------------------------


def test_startup_probe_gives_a_slow_start_ten_minutes_then_liveness(helm: Path) -> None:
    gpus = gpus_container(render_objects(helm))
    startup, liveness = gpus["startupProbe"], gpus["livenessProbe"]
    for probe in (startup, liveness):
        assert probe["grpc"] == {"port": 51516, "service": "liveness"}
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600
    # The liveness probe starts after the startup probe passed, and tolerates a slow check.
    assert liveness["timeoutSeconds"] >= 5
    assert liveness["periodSeconds"] * liveness["failureThreshold"] >= 30


def test_no_probes_without_a_health_port(helm: Path) -> None:
    gpus = gpus_container(
        render_objects(helm, {"kubeletPlugin.containers.gpus.healthcheckPort": "-1"})
    )
    assert "startupProbe" not in gpus
    assert "livenessProbe" not in gpus


def test_init_container_waits_for_the_driver_root(helm: Path) -> None:
    objects = render_objects(
        helm,
        {
            "nvidiaDriverRoot": "/run/nvidia/driver",
            "kubeletPlugin.containers.init.resources.limits.memory": "64Mi",
            "kubeletPlugin.containers.init.securityContext.runAsUser": "0",
        },
    )
    pod = plugin_pod(objects)
    (init,) = pod["initContainers"]
    assert init["image"] == gpus_container(objects)["image"]
    assert init["command"] == ["python3", "-m", "dra_kubelet_plugin.prestart"]
    assert init["args"] == [
        "--nvidia-driver-root=/run/nvidia/driver",
        "--container-driver-root=/driver-root",
    ]
    assert init["resources"] == {"limits": {"memory": "64Mi"}}
    assert init["securityContext"] == {"runAsUser": 0}
    (mount,) = init["volumeMounts"]
    assert mount == {
        "name": "driver-root",
        "mountPath": "/driver-root",
        "readOnly": True,
        # The GPU Operator mounts its driver after the pod started: the mount must show.
        "mountPropagation": "HostToContainer",
    }
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["driver-root"]["hostPath"] == {
        "path": "/run/nvidia/driver",
        "type": "DirectoryOrCreate",
    }


def test_fake_backend_has_no_driver_root_to_wait_for(helm: Path) -> None:
    assert "initContainers" not in plugin_pod(render_objects(helm, {"devices.backend": "fake"}))


def test_default_affinity_is_nvidias(helm: Path) -> None:
    nvidia = yaml.safe_load(NVIDIA_VALUES.read_text())["kubeletPlugin"]["affinity"]
    assert plugin_pod(render_objects(helm))["affinity"] == nvidia


def test_selector_labels_override(helm: Path) -> None:
    objects = render_objects(helm, {"selectorLabelsOverride.app": "gpu-plugin"})
    ds = daemonset(objects)
    assert ds["spec"]["selector"]["matchLabels"] == {
        "app": "gpu-plugin",
        "app.kubernetes.io/component": "kubelet-plugin",
    }
    assert ds["spec"]["template"]["metadata"]["labels"]["app"] == "gpu-plugin"


def test_nvidia_cdi_hook_path_reaches_the_plugin_on_real_gpus(helm: Path) -> None:
    hook = "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    real = {"devices.backend": "nvml", "nvidiaCDIHookPath": hook}
    assert f"--nvidia-cdi-hook-path={hook}" in gpus_container(render_objects(helm, real))["args"]
    unset = gpus_container(render_objects(helm, {"devices.backend": "nvml"}))["args"]
    assert not any(a.startswith("--nvidia-cdi-hook-path") for a in unset)
