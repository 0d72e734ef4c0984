"""The scale benchmark's arithmetic over the API server's and our webhook pods' Prometheus text."""

from __future__ import annotations

import pytest
from dra_controller.allocation_controller.metrics import RECONCILE_SECONDS, ControllerMetrics
from dra_controller.webhook.metrics import REVIEW_SECONDS, ReviewMetrics
from dra_e2e.scale_metrics import (
    COMPONENTS_FLOW_SCHEMA,
    DISPATCHED,
    RECONCILE_HISTOGRAM,
    WEBHOOK_HISTOGRAM,
    WEBHOOK_REVIEW_HISTOGRAM,
    Labels,
    claims_in,
    components_flow_schema,
    delta,
    histogram_bucket,
    histogram_figures,
    histogram_quantile,
    informer_counts,
    lags,
    parse_samples,
    percentile,
    ratio_ok,
    reconcile_span,
    slowest_by_workload,
    span_samples,
    sum_by,
    wait_bands,
)
from dra_kube_client.informers import InformerStats
from prometheus_client import generate_latest

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


def test_quantile_and_bucket_read_the_same_cumulative_counts_of_every_label_set() -> None:
    # Two label sets (two outcomes) summed per le, out of order, as a scrape may list them.
    buckets: dict[Labels, float] = {
        (("le", "+Inf"), ("outcome", "denied")): 10.0,
        (("le", "0.01"), ("outcome", "allowed")): 40.0,
        (("le", "0.02"), ("outcome", "allowed")): 90.0,
        (("le", "0.01"), ("outcome", "denied")): 0.0,
        (("le", "0.02"), ("outcome", "denied")): 10.0,
        (("le", "+Inf"), ("outcome", "allowed")): 90.0,
    }
    # 100 in all: 40 <= 10 ms, 100 <= 20 ms. The 50th: 10 of the 60 in (10, 20] ms.
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.01 + 0.01 * 10 / 60)
    assert histogram_bucket(0.5, buckets) == (0.01, 0.02)
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.01 + 0.01 * 59 / 60)
    assert histogram_bucket(0.99, buckets) == (0.01, 0.02)
    # Only +Inf above the rank: the highest finite bound, as Prometheus answers.
    assert histogram_quantile(0.5, {(("le", "0.1"),): 0.0, (("le", "+Inf"),): 4.0}) == 0.1


def _pod_text(seconds: list[tuple[str, str, float]]) -> str:
    """What one webhook pod's /metrics would say after these reviews (the webhook's own
    histogram, buckets and all)."""
    metrics = ReviewMetrics()
    for kind, outcome, took in seconds:
        metrics.observe(kind, outcome, took)
    return generate_latest(metrics.registry).decode()


def test_the_webhooks_own_histogram_is_summed_over_its_pods_over_a_span() -> None:
    assert WEBHOOK_REVIEW_HISTOGRAM == REVIEW_SECONDS
    fast = [("ResourceClaim", "allowed", 0.004)] * 50
    before = {"webhook-a": _pod_text(fast[:10]), "webhook-b": _pod_text([])}
    after = {
        # a: 40 more fast reviews; b: 48 fast, 1 denied at 12 ms, 1 at 18 ms; c: a pod new in
        # the span (counts from zero) with one slow template review.
        "webhook-a": _pod_text(fast),
        "webhook-b": _pod_text(
            [
                *fast[:48],
                ("ResourceClaimTemplate", "denied", 0.012),
                ("ResourceClaim", "error", 0.018),
            ]
        ),
        "webhook-c": _pod_text([("ResourceClaimTemplate", "allowed", 0.06)]),
    }
    count = span_samples(f"{REVIEW_SECONDS}_count", before, after)
    assert sum(count.values()) == 40 + 50 + 1
    p50, p99, reviews, bucket = histogram_figures(REVIEW_SECONDS, before, after)
    assert reviews == 91
    # 88 of 91 in (3, 5] ms: the 45.5th by interpolation.
    assert p50 == pytest.approx(0.003 + 0.002 * 45.5 / 88)
    # The 90.09th: the 90th is the 18 ms review in (15, 20], the 91st the 60 ms one.
    assert bucket == (0.05, 0.1)
    assert p99 == pytest.approx(0.05 + 0.05 * (0.99 * 91 - 90) / 1)
    # Without the slow pod, p99 falls in (15, 20] ms: under the target, as the buckets say.
    del after["webhook-c"]
    _, p99, reviews, bucket = histogram_figures(REVIEW_SECONDS, before, after)
    assert reviews == 90
    assert bucket == (0.015, 0.02)
    assert p99 is not None
    assert 0.015 < p99 <= 0.02


def test_a_pod_gone_by_the_end_of_a_span_is_left_out() -> None:
    before = {"webhook-a": _pod_text([("ResourceClaim", "allowed", 0.004)] * 5)}
    assert histogram_figures(REVIEW_SECONDS, before, {}) == (None, None, 0, None)


def test_the_api_servers_figures_are_one_source_over_the_span() -> None:
    p50, p99, calls, bucket = histogram_figures(
        WEBHOOK_HISTOGRAM, {"apiserver": BEFORE}, {"apiserver": AFTER}
    )
    assert p50 == pytest.approx(0.005)
    assert p99 == pytest.approx(0.0925)
    assert (calls, bucket) == (100, (0.025, 0.1))


def _controller_text(metrics: ControllerMetrics, durations: list[float]) -> str:
    for took in durations:
        metrics.reconcile_seconds.observe(took)
    return metrics.exposition().decode()


def test_reconciles_over_a_span_come_from_the_controllers_own_histogram() -> None:
    assert RECONCILE_HISTOGRAM == RECONCILE_SECONDS
    metrics = ControllerMetrics()
    before = _controller_text(metrics, [2.0] * 3)  # before the span: left out
    after = _controller_text(metrics, [0.02] * 98 + [0.04, 0.3])
    span = reconcile_span(before, after)
    assert span.count == 100
    assert span.seconds == pytest.approx(98 * 0.02 + 0.04 + 0.3)
    # 98 in (0.01, 0.025]: the 50th interpolated there; the 99th is the 40 ms one.
    assert span.p50 == pytest.approx(0.01 + 0.015 * 50 / 98)
    assert span.p99 == pytest.approx(0.025 + 0.025 * (99 - 98) / 1)
    # No reconcile in the span: nothing to say but the count.
    idle = reconcile_span(after, after)
    assert (idle.count, idle.seconds, idle.p50, idle.p99) == (0, 0.0, None, None)


def test_informer_lists_and_restarts_over_a_span_come_from_the_controllers_counters() -> None:
    stats = {
        "ResourceClaim": InformerStats(lists=1, watch_restarts=4),
        "Pod": InformerStats(lists=1),
    }
    metrics = ControllerMetrics(lambda: {kind: (10, s) for kind, s in stats.items()})
    before = metrics.exposition().decode()
    stats["ResourceClaim"] = InformerStats(lists=3, watch_restarts=9)
    stats["Node"] = InformerStats(lists=1, watch_restarts=2)  # new since: counts from zero
    after = metrics.exposition().decode()
    lists, restarts = informer_counts(before, after)
    assert lists == {"ResourceClaim": 2.0, "Pod": 0.0, "Node": 1.0}
    assert restarts == {"ResourceClaim": 5.0, "Pod": 0.0, "Node": 2.0}
    assert informer_counts(after, after)[0] == {"ResourceClaim": 0.0, "Pod": 0.0, "Node": 0.0}


def test_the_slowest_claims_are_grouped_by_the_workload_that_begins_their_name() -> None:
    waits = {f"whole-gpu-7d9f-{i}-gpu-x": 0.1 for i in range(97)}
    waits |= {"domain-12-5c6b-a-channel-q": 14.0, "domain-3-5c6b-b-gpu-r": 15.0, "odd-1": 20.0}
    counts = slowest_by_workload(waits, 0.98, ["whole-gpu", "mig-1g", "domain"])
    assert counts == {"domain": 2, "other": 1}
    assert slowest_by_workload({}, 0.99, ["whole-gpu"]) == {}


def test_claims_are_counted_by_how_long_they_waited_and_early_slow_ones_apart() -> None:
    waits = {"a": 0.1, "b": 0.5, "c": 1.9, "d": 2.0, "e": 9.9, "f": 10.0, "g": 30.0}
    seen = {"a": 100.0, "b": 100.0, "c": 100.0, "d": 110.0, "e": 200.0, "f": 159.0}
    bands = wait_bands(waits, seen, started=100.0)
    assert bands == {
        "< 0.5 s": 1,
        "0.5-2 s": 2,
        "2-10 s": 2,
        ">= 10 s": 2,
        # d and f were seen within 60 s of the start; e later; g's sighting is unknown
        ">= 2 s and seen in the first 60 s": 2,
    }
    assert sum(list(bands.values())[:4]) == len(waits)
    assert wait_bands({}, {}, started=0.0)[">= 10 s"] == 0
