"""``promtool test rules`` on the chart's DRAResourceExhausted alert, as the chart renders it.

promtool comes from the Prometheus Go module (built once into the cache, see
``dra_e2e.prometheus``). The rules file is the one in the chart's ConfigMap (the
PrometheusRule carries the same groups).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import BASE_SETS, CHART, NAMESPACE, HelmFailed, helm_path, run_helm, set_args
from chart_render import render_objects
from dra_e2e.prometheus import ensure_prometheus

RULES_FILE = "dra-allocation-controller.rules.yaml"
SUMMARY = "{} resources exhausted: {} claims waiting for allocation"
DESCRIPTION = (
    "More than 10 ResourceClaims of DeviceClass {} that pods wait for have fit on no node "
    "for 5m; kubectl dra explain pod/NAME says why, and the pods carry DRAUnsatisfiable events."
)
RUNBOOK = "docs/runbooks/DRAResourceExhausted.md"


@pytest.fixture(scope="module")
def promtool() -> Path:
    """The cached promtool."""
    return ensure_prometheus(progress=print) / "promtool"


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The chart's rules file, rendered with the default values."""
    try:
        objects = render_objects(helm_path())
    except HelmFailed as exc:
        pytest.fail(str(exc))
    (config_map,) = [
        o for o in objects if o["kind"] == "ConfigMap" and RULES_FILE in (o.get("data") or {})
    ]
    path = tmp_path_factory.mktemp("rules") / RULES_FILE
    path.write_text(config_map["data"][RULES_FILE])
    return path


def _pending(
    cls: str, count: int, values: str, *, metric: str = "kube_resourceclaim_unsatisfiable"
) -> list[dict[str, str]]:
    """``count`` claims' series (by default: claims a pod waits for that fit nowhere)."""
    return [
        {
            "series": f'{metric}{{namespace="team",name="c{i}",resource_class="{cls}"}}',
            "values": values,
        }
        for i in range(count)
    ]


def _alert(cls: str, count: int) -> dict[str, Any]:
    return {
        "exp_labels": {"severity": "warning", "resource_class": cls},
        "exp_annotations": {
            "summary": SUMMARY.format(cls, count),
            "description": DESCRIPTION.format(cls),
            "runbook_url": RUNBOOK,
        },
    }


def _run(
    promtool: Path, rules: Path, tests: list[dict[str, Any]]
) -> subprocess.CompletedProcess[str]:
    spec = {"rule_files": [str(rules)], "evaluation_interval": "1m", "tests": tests}
    test_file = rules.with_name(f"test-{len(tests)}-{abs(hash(str(tests)))}.yaml")
    test_file.write_text(yaml.safe_dump(spec))
    return subprocess.run(
        [str(promtool), "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_rules_file_is_valid(promtool: Path, rules: Path) -> None:
    proc = subprocess.run(
        [str(promtool), "check", "rules", str(rules)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_twelve_pending_claims_of_a_class_fire_after_five_minutes(
    promtool: Path, rules: Path
) -> None:
    tests = [
        {
            "interval": "1m",
            "input_series": _pending("gpu.nvidia.com", 12, "1x15"),
            "alert_rule_test": [
                {"eval_time": "4m", "alertname": "DRAResourceExhausted", "exp_alerts": []},
                {
                    "eval_time": "6m",
                    "alertname": "DRAResourceExhausted",
                    "exp_alerts": [_alert("gpu.nvidia.com", 12)],
                },
            ],
        }
    ]
    proc = _run(promtool, rules, tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_counts_are_per_class_and_ten_is_not_above_the_threshold(
    promtool: Path, rules: Path
) -> None:
    tests = [
        {
            "interval": "1m",
            "input_series": _pending("gpu.nvidia.com", 6, "1x15")
            + _pending("mig.nvidia.com", 6, "1x15")
            + _pending("vfio.gpu.nvidia.com", 10, "1x15"),
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "DRAResourceExhausted", "exp_alerts": []}
            ],
        }
    ]
    proc = _run(promtool, rules, tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_claims_allocated_in_time_stop_the_alert(promtool: Path, rules: Path) -> None:
    # 12 pending for 3 minutes, then 8 of them allocated (their series go stale).
    series = _pending("gpu.nvidia.com", 4, "1x15") + _pending("gpu.nvidia.com", 8, "1x3 stale")
    for i, s in enumerate(series):
        s["series"] = s["series"].replace('name="c', f'name="{i}-c')
    tests = [
        {
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": "6m", "alertname": "DRAResourceExhausted", "exp_alerts": []}
            ],
        }
    ]
    proc = _run(promtool, rules, tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pending_claims_no_pod_waits_for_do_not_fire(promtool: Path, rules: Path) -> None:
    """13 claims created ahead of their jobs (pending, not unsatisfiable) while GPUs are free."""
    tests = [
        {
            "interval": "1m",
            "input_series": _pending(
                "gpu.nvidia.com", 13, "1x15", metric="kube_resourceclaim_pending"
            ),
            "alert_rule_test": [
                {"eval_time": "10m", "alertname": "DRAResourceExhausted", "exp_alerts": []}
            ],
        }
    ]
    proc = _run(promtool, rules, tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_claim_scraped_from_two_replicas_counts_once(promtool: Path, rules: Path) -> None:
    series = _pending("gpu.nvidia.com", 11, "1x15")
    twice = [
        {"series": s["series"].replace("{", f'{{instance="{r}",'), "values": s["values"]}
        for s in series
        for r in ("ctl-0", "ctl-1")
    ]
    tests = [
        {
            "interval": "1m",
            "input_series": twice,
            "alert_rule_test": [
                {
                    "eval_time": "6m",
                    "alertname": "DRAResourceExhausted",
                    "exp_alerts": [_alert("gpu.nvidia.com", 11)],
                }
            ],
        }
    ]
    proc = _run(promtool, rules, tests)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_test_that_expects_the_wrong_count_fails(promtool: Path, rules: Path) -> None:
    """The harness itself: promtool reports a mismatch (the tests above are not vacuous)."""
    tests = [
        {
            "interval": "1m",
            "input_series": _pending("gpu.nvidia.com", 12, "1x15"),
            "alert_rule_test": [
                {
                    "eval_time": "6m",
                    "alertname": "DRAResourceExhausted",
                    "exp_alerts": [_alert("gpu.nvidia.com", 11)],
                }
            ],
        }
    ]
    proc = _run(promtool, rules, tests)
    assert proc.returncode != 0


def _render_with_monitoring_api() -> list[dict[str, Any]]:
    """The chart rendered as on a cluster that serves the Prometheus operator's API."""
    out = run_helm(
        helm_path(), "template", "dra", str(CHART), "--namespace", NAMESPACE,
        "--api-versions", "monitoring.coreos.com/v1/PrometheusRule",
        "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor",
        *set_args(BASE_SETS),
    )  # fmt: skip
    return [doc for doc in yaml.safe_load_all(out) if doc]


def test_prometheus_operator_objects_when_its_api_exists(rules: Path) -> None:
    objects = _render_with_monitoring_api()
    (rule,) = [
        o
        for o in objects
        if o["kind"] == "PrometheusRule" and o["metadata"]["name"].endswith("allocation-controller")
    ]
    assert rule["spec"] == yaml.safe_load(rules.read_text())
    assert not [o for o in objects if o["kind"] == "ConfigMap" and RULES_FILE in o.get("data", {})]
    (monitor,) = [o for o in objects if o["kind"] == "ServiceMonitor"]
    (service,) = [
        o
        for o in objects
        if o["kind"] == "Service" and "allocation-controller" in o["metadata"]["name"]
    ]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [
        p["name"] for p in service["spec"]["ports"]
    ]


def test_dashboard_config_map_for_the_grafana_sidecar() -> None:
    objects = render_objects(helm_path())
    (dashboard,) = [
        o
        for o in objects
        if o["kind"] == "ConfigMap" and "dra-allocation.json" in o.get("data", {})
    ]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    board = json.loads(dashboard["data"]["dra-allocation.json"])
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for metric in (
        "kube_resourceclaim_pending",
        "kube_resourceclaim_allocated",
        "kube_resourceclaim_unsatisfiable",
        "node_dra_resource_available",
        "nvidia_dra_device_allocation_info",
        "namespace_pod:DCGM_FI_DEV_GPU_UTIL:max",
        "namespace_pod:DCGM_FI_DEV_FB_USED:max",
    ):
        assert metric in exprs
