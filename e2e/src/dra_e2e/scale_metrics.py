"""The scale benchmark's arithmetic: percentiles, and the API server's own metrics.

The API server's ``/metrics`` (Prometheus text) is read before and after a run; the run's
figures are the differences: the webhook admission latency histogram
(``apiserver_admission_webhook_admission_duration_seconds``) as p50/p99, and the requests
dispatched per FlowSchema (``apiserver_flowcontrol_dispatched_requests_total``). The API
server labels no metric with the user agent; the benchmark gives our components a FlowSchema
of their own (:func:`components_flow_schema`) so their requests are counted apart.

Our allocation controller's ``/metrics`` is scraped during a run: a claim's first sample in
``kube_resourceclaim_allocated`` against its allocation seen by a claim watch is the metrics
lag (:func:`claims_in`, :func:`lags`); its reconcile histogram at the creation's start and
end gives the time it spent reconciling (:func:`reconcile_span`). Our webhook's pods'
``/metrics`` are read at the same moments as the API server's: their own review histogram
(``dra_webhook_review_duration_seconds``, fine buckets around the 20 ms target) summed over
the pods (:func:`histogram_figures`).

Pure: text in, numbers out.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_controller.allocation_controller.metrics import RECONCILE_SECONDS, RELISTS, WATCH_RESTARTS
from dra_controller.webhook.metrics import REVIEW_SECONDS

WEBHOOK_HISTOGRAM = "apiserver_admission_webhook_admission_duration_seconds"
#: The webhook's own: a review's time inside it (see dra_controller.webhook.metrics).
WEBHOOK_REVIEW_HISTOGRAM = REVIEW_SECONDS
DISPATCHED = "apiserver_flowcontrol_dispatched_requests_total"
#: Our allocation controller's: each reconcile's wall time.
RECONCILE_HISTOGRAM = RECONCILE_SECONDS
#: Our allocation controller's series of an allocated claim (``namespace``, ``name``).
CLAIM_ALLOCATED = "kube_resourceclaim_allocated"
#: The FlowSchema the benchmark puts our components' service accounts in.
COMPONENTS_FLOW_SCHEMA = "dra-driver-components"

_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Labels = tuple[tuple[str, str], ...]
#: (p50, p99, observations, the bucket p99 falls in) of a latency histogram over a span,
#: seconds.
HistogramFigures = tuple[float | None, float | None, int, tuple[float, float] | None]


@functools.cache
def _samples_of(name: str) -> re.Pattern[str]:
    # One pattern per metric over the whole text: the run scrapes ~14,000 series twice a
    # second on the CPU it measures, and a scan in the regex engine costs far less than a
    # match per line.
    return re.compile(
        rf"^{re.escape(name)}(?:\{{(?P<labels>[^}}\n]*)\}})?[ \t]+(?P<v>\S+)", re.MULTILINE
    )


def parse_samples(text: str, name: str) -> dict[Labels, float]:
    """Every sample of metric ``name`` in Prometheus text, by its sorted label pairs."""
    out: dict[Labels, float] = {}
    for match in _samples_of(name).finditer(text):
        out[_label_pairs(match.group("labels") or "")] = float(match.group("v"))
    return out


@functools.lru_cache(maxsize=1 << 16)
def _label_pairs(text: str) -> Labels:
    # A series' labels are the same text scrape after scrape: parsed once.
    return tuple(sorted(_LABEL.findall(text)))


def delta(before: Mapping[Labels, float], after: Mapping[Labels, float]) -> dict[Labels, float]:
    """``after - before`` per label set (a counter absent before counts from zero)."""
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def _cumulative(buckets: Mapping[Labels, float]) -> list[tuple[float, float]] | None:
    """A histogram's ``_bucket`` samples as ``(le, cumulative count)`` by rising ``le``, all
    label sets summed per ``le``; ``None`` without observations."""
    per_le: dict[float, float] = defaultdict(float)
    for labels, value in buckets.items():
        le = dict(labels).get("le")
        if le is not None:
            per_le[math.inf if le == "+Inf" else float(le)] += value
    bounds = sorted(per_le)
    if not bounds or per_le[bounds[-1]] <= 0:
        return None
    return [(bound, per_le[bound]) for bound in bounds]


def histogram_quantile(q: float, buckets: Mapping[Labels, float]) -> float | None:
    """The ``q`` quantile of a histogram's ``_bucket`` samples (all label sets summed per
    ``le``), interpolated as Prometheus does; ``None`` without observations."""
    cumulative = _cumulative(buckets)
    if cumulative is None:
        return None
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in cumulative:
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower


def histogram_bucket(q: float, buckets: Mapping[Labels, float]) -> tuple[float, float] | None:
    """The bucket ``(lower, upper]`` the ``q`` quantile falls in: all a histogram can say of
    it (the interpolation inside a bucket is a guess); ``None`` without observations."""
    cumulative = _cumulative(buckets)
    if cumulative is None:
        return None
    rank = q * cumulative[-1][1]
    lower = 0.0
    for bound, count in cumulative:
        if count >= rank:
            return lower, bound
        lower = bound
    return lower, math.inf


def span_samples(
    name: str, before: Mapping[str, str], after: Mapping[str, str]
) -> dict[Labels, float]:
    """The samples of ``name`` over a span, summed per label set over every source: each
    source's (an endpoint's, e.g. one webhook pod's) Prometheus text at the span's start
    (``before``) and end (``after``). A source new at the end counts from zero; one gone by
    the end (a replaced pod) is left out."""
    out: dict[Labels, float] = defaultdict(float)
    for source, text in after.items():
        start = parse_samples(before.get(source, ""), name)
        for labels, value in delta(start, parse_samples(text, name)).items():
            out[labels] += value
    return dict(out)


def histogram_figures(
    name: str, before: Mapping[str, str], after: Mapping[str, str]
) -> HistogramFigures:
    """p50, p99 (interpolated: :func:`histogram_quantile`), the observations and the bucket
    p99 falls in, of histogram ``name`` over a span (sources as :func:`span_samples`)."""
    buckets = span_samples(f"{name}_bucket", before, after)
    count = sum(span_samples(f"{name}_count", before, after).values())
    return (
        histogram_quantile(0.5, buckets),
        histogram_quantile(0.99, buckets),
        int(count),
        histogram_bucket(0.99, buckets),
    )


@dataclass(frozen=True)
class ReconcileSpan:
    """The allocation controller's reconciles over a span, from its own histogram."""

    count: int
    #: their wall time, summed
    seconds: float
    p50: float | None
    p99: float | None


def reconcile_span(before: str, after: str) -> ReconcileSpan:
    """The reconciles between two scrapes of the allocation controller's ``/metrics``."""
    start, end = {"controller": before}, {"controller": after}
    p50, p99, count, _ = histogram_figures(RECONCILE_HISTOGRAM, start, end)
    total = sum(span_samples(f"{RECONCILE_HISTOGRAM}_sum", start, end).values())
    return ReconcileSpan(count=count, seconds=total, p50=p50, p99=p99)


def informer_counts(before: str, after: str) -> tuple[dict[str, float], dict[str, float]]:
    """The allocation controller's full lists and reopened watches between two scrapes of its
    ``/metrics``, by kind (counters: ``_total`` samples)."""

    def by_kind(counter: str) -> dict[str, float]:
        name = f"{counter}_total"
        return sum_by(delta(parse_samples(before, name), parse_samples(after, name)), "kind")

    return by_kind(RELISTS), by_kind(WATCH_RESTARTS)


def sum_by(samples: Mapping[Labels, float], label: str) -> dict[str, float]:
    """Samples summed by the value of one label."""
    out: dict[str, float] = defaultdict(float)
    for labels, value in samples.items():
        out[dict(labels).get(label, "")] += value
    return dict(out)


def claims_in(text: str, namespace: str, metric: str = CLAIM_ALLOCATED) -> set[str]:
    """Names of the claims of ``namespace`` that ``metric`` has a non-zero sample for."""
    return {
        dict(labels).get("name", "")
        for labels, value in parse_samples(text, metric).items()
        if value and dict(labels).get("namespace") == namespace
    }


def lags(since: Mapping[str, float], seen: Mapping[str, float]) -> list[float]:
    """``seen[k] - since[k]`` for every key in both (e.g. a claim's allocation, as a claim
    watch saw it, to its first scrape showing it allocated), in seconds."""
    return [seen[k] - since[k] for k in since.keys() & seen.keys()]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` (0..1) percentile of ``values`` by the nearest-rank rule; ``None`` if empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def slowest_by_workload(
    waits: Mapping[str, float], q: float, workloads: Sequence[str]
) -> dict[str, int]:
    """How many claims waited at least the ``q``-quantile of ``waits`` (claim name ->
    seconds), by the workload whose name begins theirs (a Deployment's pods, and the claims
    made for them, are named ``<deployment>-...``); ``other`` for the rest."""
    cut = percentile(list(waits.values()), q)
    out: dict[str, int] = {}
    if cut is None:
        return out
    for name, wait in waits.items():
        if wait >= cut:
            group = next((w for w in workloads if name.startswith(f"{w}-")), "other")
            out[group] = out.get(group, 0) + 1
    return out


#: Where claim-to-bound bands split (seconds): at 0.5 s a claim was allocated on its pod's
#: first scheduling attempts; past 2 s it waited for a retry.
WAIT_BANDS = (0.5, 2.0, 10.0)
#: A claim waiting at least this long counts as slow in :func:`wait_bands`.
SLOW_WAIT_S = 2.0


def wait_bands(
    waits: Mapping[str, float],
    seen: Mapping[str, float],
    *,
    started: float,
    early_s: float = 60.0,
) -> dict[str, int]:
    """How many claims waited how long (claim name -> seconds), in bands split at
    :data:`WAIT_BANDS` (``< 0.5 s``, ``0.5-2 s``, ``2-10 s``, ``>= 10 s``), and how many of
    the slow ones (``SLOW_WAIT_S`` or more) were seen (``seen``: claim name -> monotonic
    time) within ``early_s`` of ``started`` (the last entry): a tail made at the phase's
    start is a start-up transient, one spread over the phase is steady."""
    labels = [f"< {WAIT_BANDS[0]:g} s"]
    labels += [f"{lo:g}-{hi:g} s" for lo, hi in itertools.pairwise(WAIT_BANDS)]
    labels.append(f">= {WAIT_BANDS[-1]:g} s")
    out = dict.fromkeys(labels, 0)
    early = 0
    for claim, wait in waits.items():
        band = sum(1 for bound in WAIT_BANDS if wait >= bound)
        out[labels[band]] += 1
        if wait >= SLOW_WAIT_S and seen.get(claim, started + early_s) - started < early_s:
            early += 1
    out[f">= {SLOW_WAIT_S:g} s and seen in the first {early_s:g} s"] = early
    return out


def components_flow_schema(namespace: str) -> dict[str, Any]:
    """A FlowSchema for every service account of ``namespace`` (our components), at the
    priority level service accounts get anyway (``workload-low``): the same treatment, but
    their requests are counted under a FlowSchema of their own."""
    return {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": COMPONENTS_FLOW_SCHEMA},
        "spec": {
            "matchingPrecedence": 500,
            "priorityLevelConfiguration": {"name": "workload-low"},
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [
                        {
                            "kind": "ServiceAccount",
                            "serviceAccount": {"namespace": namespace, "name": "*"},
                        }
                    ],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "clusterScope": True,
                            "namespaces": ["*"],
                        }
                    ],
                    "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                }
            ],
        },
    }


def format_figure(value: float | None, unit: str, digits: int = 1) -> str:
    """A figure for the report (``n/a`` when there is none)."""
    return "n/a" if value is None else f"{value:.{digits}f} {unit}".rstrip()


def ratio_ok(with_: float | None, without: float | None, *, most: float) -> str:
    """``ok``/``MISSED`` for ``with_ / without <= most`` (``n/a`` when either is missing)."""
    if with_ is None or without is None or without == 0:
        return "n/a"
    return "ok" if with_ / without <= most else "MISSED"


def top(counts: Mapping[str, float], n: int = 8) -> Iterable[tuple[str, float]]:
    """The ``n`` largest counts, largest first."""
    return sorted(counts.items(), key=lambda kv: -kv[1])[:n]
