"""The chart's monitoring objects: the true|false|auto switches, their labels, the dashboard's
namespace and labels, the NOTES lines, and ``promtool test rules`` on the recording rules that
put namespace and pod on dcgm-exporter's series."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import NAMESPACE, HelmFailed, helm_path
from chart_render import render_notes, render_objects
from dra_e2e.prometheus import ensure_prometheus

MONITORING_APIS = (
    "monitoring.coreos.com/v1/ServiceMonitor",
    "monitoring.coreos.com/v1/PodMonitor",
    "monitoring.coreos.com/v1/PrometheusRule",
)
OPERATOR_KINDS = ("ServiceMonitor", "PodMonitor", "PrometheusRule")
GPU_RULES_FILE = "dra-gpu-pod-metrics.rules.yaml"
ALERT_RULES_FILE = "dra-allocation-controller.rules.yaml"


def _kinds(objects: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for o in objects:
        if o["kind"] in OPERATOR_KINDS:
            counts[o["kind"]] = counts.get(o["kind"], 0) + 1
    return counts


def _rule_config_maps(objects: list[dict[str, Any]]) -> set[str]:
    return {
        key
        for o in objects
        if o["kind"] == "ConfigMap"
        for key in (o.get("data") or {})
        if key.endswith(".rules.yaml")
    }


@pytest.mark.parametrize(
    ("mode", "apis", "rendered"),
    [
        ("auto", (), {}),
        ("auto", MONITORING_APIS, {"ServiceMonitor": 1, "PodMonitor": 1, "PrometheusRule": 2}),
        ("true", (), {"ServiceMonitor": 1, "PodMonitor": 1, "PrometheusRule": 2}),
        ("false", MONITORING_APIS, {}),
    ],
)
def test_each_switch_true_false_auto(
    mode: str, apis: tuple[str, ...], rendered: dict[str, int]
) -> None:
    sets = {f"monitoring.{k}": mode for k in ("serviceMonitor", "podMonitor", "prometheusRule")}
    objects = render_objects(helm_path(), sets, api_versions=apis)
    assert _kinds(objects) == rendered
    # Without PrometheusRules the rules files are ConfigMaps, never both.
    expected_files = set() if rendered else {GPU_RULES_FILE, ALERT_RULES_FILE}
    assert _rule_config_maps(objects) == expected_files


def test_switches_are_independent() -> None:
    objects = render_objects(
        helm_path(),
        {
            "monitoring.serviceMonitor": "false",
            "monitoring.podMonitor": "true",
            "monitoring.prometheusRule": "auto",
        },
        api_versions=("monitoring.coreos.com/v1/ServiceMonitor",),
    )
    assert _kinds(objects) == {"PodMonitor": 1}
    assert _rule_config_maps(objects) == {GPU_RULES_FILE, ALERT_RULES_FILE}


def test_extra_labels_reach_every_operator_object_and_old_values_still_apply() -> None:
    objects = render_objects(
        helm_path(),
        {
            "monitoring.labels.release": "kps",
            "allocationController.serviceMonitor.labels.team": "gpu",
            "allocationController.alerts.ruleLabels.role": "alert-rules",
        },
        api_versions=MONITORING_APIS,
    )
    operator = [o for o in objects if o["kind"] in OPERATOR_KINDS]
    assert len(operator) == 4
    for o in operator:
        assert o["metadata"]["labels"]["release"] == "kps", o["metadata"]["name"]
    (monitor,) = [o for o in operator if o["kind"] == "ServiceMonitor"]
    assert monitor["metadata"]["labels"]["team"] == "gpu"
    (alert,) = [
        o
        for o in operator
        if o["kind"] == "PrometheusRule" and o["metadata"]["name"].endswith("allocation-controller")
    ]
    assert alert["metadata"]["labels"]["role"] == "alert-rules"


def test_service_monitor_enabled_false_still_wins_over_true() -> None:
    objects = render_objects(
        helm_path(),
        {
            "monitoring.serviceMonitor": "true",
            "allocationController.serviceMonitor.enabled": "false",
        },
    )
    assert "ServiceMonitor" not in _kinds(objects)


def test_pod_monitor_selects_the_plugin_pods_ports_and_keeps_workload_labels() -> None:
    objects = render_objects(helm_path(), {"monitoring.podMonitor": "true"})
    (monitor,) = [o for o in objects if o["kind"] == "PodMonitor"]
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
    ports = {
        p["name"]
        for c in daemonset["spec"]["template"]["spec"]["containers"]
        for p in c.get("ports", [])
    }
    endpoints = monitor["spec"]["podMetricsEndpoints"]
    assert {e["port"] for e in endpoints} <= ports
    assert "metrics" in {e["port"] for e in endpoints}
    assert all(e["honorLabels"] is True and e["path"] == "/metrics" for e in endpoints)
    off = render_objects(
        helm_path(), {"monitoring.podMonitor": "true", "kubeletPlugin.metrics.enabled": "false"}
    )
    assert "PodMonitor" not in _kinds(off)


def test_dashboard_namespace_labels_and_annotations_are_settable() -> None:
    objects = render_objects(
        helm_path(),
        {
            "allocationController.dashboard.namespace": "grafana",
            "allocationController.dashboard.labels.grafana_dashboard": "yes",
            "allocationController.dashboard.annotations.grafana_folder": "GPU",
        },
    )
    (board,) = [o for o in objects if o["metadata"]["name"].endswith("-dashboard")]
    assert board["metadata"]["namespace"] == "grafana"
    assert board["metadata"]["labels"]["grafana_dashboard"] == "yes"
    assert board["metadata"]["annotations"] == {"grafana_folder": "GPU"}
    (default,) = [
        o for o in render_objects(helm_path()) if o["metadata"]["name"].endswith("-dashboard")
    ]
    assert default["metadata"]["namespace"] == NAMESPACE


def test_a_mode_outside_true_false_auto_is_refused() -> None:
    with pytest.raises(HelmFailed, match="podMonitor"):
        render_objects(helm_path(), {"monitoring.podMonitor": "yes"})


def test_notes_say_where_metrics_alert_and_dashboard_are_and_what_did_not_render() -> None:
    notes = render_notes(helm_path())
    assert "no PodMonitor (monitoring.podMonitor=auto" in notes
    assert "set monitoring.serviceMonitor=true to render it anyway" in notes
    assert "key dra-allocation-controller.rules.yaml" in notes
    assert "runbook: docs/runbooks/DRAResourceExhausted.md" in notes
    assert (
        f"ConfigMap {NAMESPACE}/dra-dra-driver-nvidia-gpu-allocation-controller-dashboard" in notes
    )
    assert "monitoring.labels.release=<its release name>" in notes
    on = render_notes(
        helm_path(),
        {"monitoring.labels.release": "kps", "allocationController.dashboard.namespace": "graf"},
        api_versions=MONITORING_APIS,
    )
    assert f"PodMonitor {NAMESPACE}/dra-dra-driver-nvidia-gpu-kubelet-plugin." in on
    assert f"PrometheusRule {NAMESPACE}/dra-dra-driver-nvidia-gpu-allocation-controller." in on
    assert f"PrometheusRule {NAMESPACE}/dra-dra-driver-nvidia-gpu-gpu-pod-metrics." in on
    assert "ConfigMap graf/dra-dra-driver-nvidia-gpu-allocation-controller-dashboard" in on
    assert "monitoring.labels.release=<its release name>" not in on


# ------------------------------------------------------------------ recording rules


@pytest.fixture(scope="module")
def promtool() -> Path:
    """The cached promtool."""
    return ensure_prometheus(progress=print) / "promtool"


@pytest.fixture(scope="module")
def gpu_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart's GPU pod rules file, rendered with the default values."""
    (config_map,) = [
        o for o in render_objects(helm_path()) if GPU_RULES_FILE in (o.get("data") or {})
    ]
    path = tmp_path_factory.mktemp("gpu-rules") / GPU_RULES_FILE
    path.write_text(config_map["data"][GPU_RULES_FILE])
    return path


def _info(
    pod: str, device: str, uuid: str, gi: str = "", mig: str = "", container: str = "ctr"
) -> dict[str, str]:
    labels = (
        f'node="n1",driver="gpu.nvidia.com",namespace="team",pod="{pod}",pod_uid="u-{pod}",'
        f'container="{container}",claim="c-{pod}",claim_uid="cu-{pod}",request="gpu",'
        f'device="{device}",UUID="{uuid}",gpu="0",GPU_I_ID="{gi}",mig_uuid="{mig}"'
    )
    # Scraped with the plugin pod's target labels added (instance, job).
    return {
        "series": f'nvidia_dra_device_allocation_info{{{labels},instance="10.0.0.1:8080",job="p"}}',
        "values": "1x10",
    }


def _joined(pod: str, device: str, uuid: str, gi: str = "", mig: str = "") -> dict[str, str]:
    return {
        "namespace": "team", "pod": pod, "claim": f"c-{pod}", "request": "gpu",
        "device": device, "node": "n1", "UUID": uuid, "GPU_I_ID": gi, "mig_uuid": mig,
    }  # fmt: skip


def _run(promtool: Path, rules: Path, tests: list[dict[str, Any]]) -> str:
    spec = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}
    test_file = rules.with_name(f"test-{abs(hash(str(tests)))}.yaml")
    test_file.write_text(yaml.safe_dump(spec))
    proc = subprocess.run(
        [str(promtool), "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if proc.returncode == 0 else proc.stdout + proc.stderr


def test_gpu_rules_file_is_valid(promtool: Path, gpu_rules: Path) -> None:
    proc = subprocess.run(
        [str(promtool), "check", "rules", str(gpu_rules)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    groups = yaml.safe_load(gpu_rules.read_text())["groups"]
    assert [r["record"] for r in groups[0]["rules"]] == [
        "namespace_pod:DCGM_FI_DEV_GPU_UTIL:max",
        "namespace_pod:DCGM_FI_PROF_GR_ENGINE_ACTIVE:max",
        "namespace_pod:DCGM_FI_DEV_FB_USED:max",
        "namespace_pod:DCGM_FI_DEV_FB_FREE:max",
    ]


def test_dcgm_series_get_the_workload_pod_for_gpus_mig_and_shared_gpus(
    promtool: Path, gpu_rules: Path
) -> None:
    # dcgm-exporter's series as scraped: its own namespace/pod, no workload labels.
    exporter = 'namespace="gpu-operator",pod="nvidia-dcgm-exporter-x",Hostname="n1",gpu="0"'
    tests = [
        {
            "interval": "1m",
            "input_series": [
                {"series": f'DCGM_FI_DEV_GPU_UTIL{{UUID="GPU-a",{exporter}}}', "values": "87x10"},
                {"series": f'DCGM_FI_DEV_GPU_UTIL{{UUID="GPU-c",{exporter}}}', "values": "5x10"},
                {
                    "series": f'DCGM_FI_DEV_FB_USED{{UUID="GPU-b",GPU_I_ID="7",{exporter}}}',
                    "values": "1024x10",
                },
                {
                    "series": f'DCGM_FI_DEV_FB_USED{{UUID="GPU-b",GPU_I_ID="8",{exporter}}}',
                    "values": "2048x10",
                },
                _info("trainer", "gpu-0", "GPU-a"),
                _info("mig-job", "gpu-1-mig-1g-0", "GPU-b", gi="7", mig="MIG-x"),
                # One GPU time-shared by two pods: each gets the GPU's value.
                _info("share-1", "gpu-2", "GPU-s"),
                _info("share-2", "gpu-2", "GPU-s"),
                {"series": f'DCGM_FI_DEV_GPU_UTIL{{UUID="GPU-s",{exporter}}}', "values": "40x10"},
            ],
            "promql_expr_test": [
                {
                    "expr": "namespace_pod:DCGM_FI_DEV_GPU_UTIL:max",
                    "eval_time": "5m",
                    "exp_samples": [
                        {
                            "labels": _labels(
                                "namespace_pod:DCGM_FI_DEV_GPU_UTIL:max",
                                _joined("trainer", "gpu-0", "GPU-a"),
                            ),
                            "value": 87,
                        },
                        {
                            "labels": _labels(
                                "namespace_pod:DCGM_FI_DEV_GPU_UTIL:max",
                                _joined("share-1", "gpu-2", "GPU-s"),
                            ),
                            "value": 40,
                        },
                        {
                            "labels": _labels(
                                "namespace_pod:DCGM_FI_DEV_GPU_UTIL:max",
                                _joined("share-2", "gpu-2", "GPU-s"),
                            ),
                            "value": 40,
                        },
                    ],
                },
                {
                    "expr": "namespace_pod:DCGM_FI_DEV_FB_USED:max",
                    "eval_time": "5m",
                    "exp_samples": [
                        {
                            "labels": _labels(
                                "namespace_pod:DCGM_FI_DEV_FB_USED:max",
                                _joined("mig-job", "gpu-1-mig-1g-0", "GPU-b", gi="7", mig="MIG-x"),
                            ),
                            "value": 1024,
                        }
                    ],
                },
            ],
        }
    ]
    assert _run(promtool, gpu_rules, tests) == ""


def test_a_gpu_shared_by_containers_of_one_pod_is_one_series_of_the_pod(
    promtool: Path, gpu_rules: Path
) -> None:
    """The info series has one series per container using the claim; the pod-level rules
    collapse them, so summing a pod's devices counts the GPU once (and a kubelet that names
    no container, container empty, gives the same series)."""
    recorded = "namespace_pod:DCGM_FI_DEV_FB_USED:max"
    tests = [
        {
            "interval": "1m",
            "input_series": [
                {"series": 'DCGM_FI_DEV_FB_USED{UUID="GPU-a"}', "values": "1024x10"},
                {"series": 'DCGM_FI_DEV_FB_USED{UUID="GPU-u"}', "values": "512x10"},
                _info("trainer", "gpu-0", "GPU-a", container="main"),
                _info("trainer", "gpu-0", "GPU-a", container="sidecar"),
                _info("unknown", "gpu-1", "GPU-u", container=""),
            ],
            "promql_expr_test": [
                {
                    "expr": recorded,
                    "eval_time": "5m",
                    "exp_samples": [
                        {
                            "labels": _labels(recorded, _joined("trainer", "gpu-0", "GPU-a")),
                            "value": 1024,
                        },
                        {
                            "labels": _labels(recorded, _joined("unknown", "gpu-1", "GPU-u")),
                            "value": 512,
                        },
                    ],
                },
                {
                    "expr": f'sum by (namespace, pod) ({recorded}{{pod="trainer"}})',
                    "eval_time": "5m",
                    "exp_samples": [{"labels": '{namespace="team",pod="trainer"}', "value": 1024}],
                },
                {
                    # A container's view: the info series has one series per container.
                    "expr": "count by (container) "
                    '(nvidia_dra_device_allocation_info{pod="trainer"})',
                    "eval_time": "5m",
                    "exp_samples": [
                        {"labels": '{container="main"}', "value": 1},
                        {"labels": '{container="sidecar"}', "value": 1},
                    ],
                },
            ],
        }
    ]
    assert _run(promtool, gpu_rules, tests) == ""


def test_a_wrong_expected_pod_fails(promtool: Path, gpu_rules: Path) -> None:
    """The harness itself: promtool reports a mismatch (the test above is not vacuous)."""
    tests = [
        {
            "interval": "1m",
            "input_series": [
                {"series": 'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-a"}', "values": "87x10"},
                _info("trainer", "gpu-0", "GPU-a"),
            ],
            "promql_expr_test": [
                {
                    "expr": "namespace_pod:DCGM_FI_DEV_GPU_UTIL:max",
                    "eval_time": "5m",
                    "exp_samples": [
                        {
                            "labels": _labels(
                                "namespace_pod:DCGM_FI_DEV_GPU_UTIL:max",
                                _joined("other", "gpu-0", "GPU-a"),
                            ),
                            "value": 87,
                        },
                    ],
                }
            ],
        }
    ]
    assert _run(promtool, gpu_rules, tests) != ""


def _labels(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items() if v != "")
    return f"{name}{{{inner}}}"
