"""The scale benchmark's arithmetic over the API server's Prometheus text."""

from __future__ import annotations

import pytest
from dra_e2e.scale_metrics import (
    COMPONENTS_FLOW_SCHEMA,
    DISPATCHED,
    WEBHOOK_HISTOGRAM,
    Labels,
    claims_in,
    components_flow_schema,
    delta,
    histogram_bucket,
    histogram_quantile,
    lags,
    parse_samples,
    percentile,
    ratio_ok,
    sum_by,
)

BEFORE = f"""# HELP {WEBHOOK_HISTOGRAM} x
# TYPE {WEBHOOK_HISTOGRAM} histogram
{WEBHOOK_HISTOGRAM}_bucket{{name="v.nvidia.com",operation="CREATE",le="0.005"}} 0
{WEBHOOK_HISTOGRAM}_bucket{{name="v.nvidia.com",operation="CREATE",le="0.025"}} 0
{WEBHOOK_HISTOGRAM}_bucket{{name="v.nvidia.com",operation="CREATE",le="0.1"}} 0
{WEBHOOK_HISTOGRAM}_bucket{{name="v.nvidia.com",operation="CREATE",le="+Inf"}} 0
{DISPATCHED}{{flow_schema="exempt",priority_level="exempt"}} 10
"""
AFTER = f"""{WEBHOOK_HISTOGRAM}_bucket{{name="v.nvidia.com",operation="CREATE",le="0.005"}} 50
{WEBHOOK_HISTOGRAM}_bucket{{name="v.nvidia.com",operation="CREATE",le="0.025"}} 90
{WEBHOOK_HISTOGRAM}_bucket{{name="v.nvidia.com",operation="CREATE",le="0.1"}} 100
{WEBHOOK_HISTOGRAM}_bucket{{name="v.nvidia.com",operation="CREATE",le="+Inf"}} 100
{WEBHOOK_HISTOGRAM}_count{{name="v.nvidia.com",operation="CREATE"}} 100
{DISPATCHED}{{flow_schema="exempt",priority_level="exempt"}} 25
{DISPATCHED}{{flow_schema="{COMPONENTS_FLOW_SCHEMA}",priority_level="workload-low"}} 7
{DISPATCHED}{{flow_schema="{COMPONENTS_FLOW_SCHEMA}",priority_level="other"}} 3
"""


def test_webhook_quantiles_come_from_the_bucket_differences() -> None:
    name = f"{WEBHOOK_HISTOGRAM}_bucket"
    hist = delta(parse_samples(BEFORE, name), parse_samples(AFTER, name))
    assert len(hist) == 4
    assert histogram_quantile(0.5, hist) == pytest.approx(0.005)
    # 99th of 100: between 0.025 (90) and 0.1 (100), 9 of the 10 -> 0.0925.
    assert histogram_quantile(0.99, hist) == pytest.approx(0.0925)
    assert histogram_quantile(0.5, parse_samples(BEFORE, name)) is None


def test_requests_are_summed_by_flow_schema_over_the_phase() -> None:
    counts = sum_by(
        delta(parse_samples(BEFORE, DISPATCHED), parse_samples(AFTER, DISPATCHED)), "flow_schema"
    )
    assert counts == {"exempt": 15.0, COMPONENTS_FLOW_SCHEMA: 10.0}


def test_percentile_uses_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([], 0.5) is None


def test_ratio_verdicts() -> None:
    assert ratio_ok(1.05, 1.0, most=1.10) == "ok"
    assert ratio_ok(1.2, 1.0, most=1.10) == "MISSED"
    assert ratio_ok(None, 1.0, most=1.10) == "n/a"


def test_flow_schema_takes_every_service_account_of_the_namespace() -> None:
    schema = components_flow_schema("nvidia-dra-driver")
    (rule,) = schema["spec"]["rules"]
    assert rule["subjects"][0]["serviceAccount"] == {"namespace": "nvidia-dra-driver", "name": "*"}
    assert schema["spec"]["priorityLevelConfiguration"]["name"] == "workload-low"
    assert schema["metadata"]["name"] == COMPONENTS_FLOW_SCHEMA


def test_claims_in_the_allocation_controllers_metrics_and_their_lag() -> None:
    text = (
        "# HELP kube_resourceclaim_allocated x\n"
        'kube_resourceclaim_allocated{namespace="scale-with",name="a",resource_class="g"} 1\n'
        'kube_resourceclaim_allocated{namespace="scale-with",name="b",resource_class="g"} 1\n'
        'kube_resourceclaim_allocated{namespace="other",name="c",resource_class="g"} 1\n'
        'kube_resourceclaim_pending{namespace="scale-with",name="d",resource_class="g"} 1\n'
    )
    assert claims_in(text, "scale-with") == {"a", "b"}
    assert claims_in(text, "scale-with", "kube_resourceclaim_pending") == {"d"}
    assert sorted(lags({"a": 1.0, "b": 2.0, "x": 3.0}, {"a": 1.5, "b": 4.0, "c": 9.0})) == [
        0.5,
        2.0,
    ]


def test_histogram_bucket_names_the_bucket_a_quantile_falls_in() -> None:
    le = "le"
    buckets: dict[Labels, float] = {
        ((le, "0.005"),): 90.0,
        ((le, "0.025"),): 99.0,
        ((le, "0.1"),): 100.0,
        ((le, "+Inf"),): 100.0,
    }
    assert histogram_bucket(0.5, buckets) == (0.0, 0.005)
    assert histogram_bucket(0.95, buckets) == (0.005, 0.025)
    assert histogram_bucket(0.99, buckets) == (0.005, 0.025)
    assert histogram_bucket(0.999, buckets) == (0.025, 0.1)
    assert histogram_bucket(0.5, {}) is None
