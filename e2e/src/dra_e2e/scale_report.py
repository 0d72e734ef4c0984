"""The scale benchmark's figures and its report: each figure without and with our components,
next to issue #27's target.

Pure: the phases' figures in, table rows and text out (``e2e/bench/bench_scale.py``
measures them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dra_e2e.host_cpu import CpuSplit, cpu_lines
from dra_e2e.memory_timeline import MemorySample, by_step, describe, thinned
from dra_e2e.pod_usage import PodUsage
from dra_e2e.scale_metrics import (
    COMPONENTS_FLOW_SCHEMA,
    HistogramFigures,
    ReconcileSpan,
    format_figure,
    percentile,
    ratio_ok,
    top,
)

#: (p50, p99, observations, the bucket p99 falls in) of a webhook latency histogram over a
#: span, seconds: the API server's admission histogram, or the webhook's own.
WebhookFigures = HistogramFigures
#: What each webhook figure covers, said in its rows.
API_SERVER_SPAN = "API server: +TLS, network, queueing"
WEBHOOK_SPAN = "webhook-side: parse+validate+write"

_MB = 1_000_000
ALLOCATION_CONTROLLER = "allocation-controller"
#: Issue #27's targets.
ALLOCATION_RSS_MB = 300
#: Seconds between the samples of the allocation controller's memory the report lists.
TIMELINE_S = 60.0
ALLOCATION_CORES = 0.5
WEBHOOK_P99_MS = 20
METRICS_LAG_P99_S = 2.0
EXPLAIN_S = 3.0


@dataclass(frozen=True)
class Creation:
    """The workload asked for at a steady rate, until every claim is bound."""

    pods_per_s: float | None
    scheduled: int
    claims: int
    domains: int
    bound_p50: float | None
    bound_p99: float | None
    webhook_first: WebhookFigures
    webhook_steady: WebhookFigures
    requests: Mapping[str, float]
    seconds: float
    #: seconds from the ComputeDomains' creation to the controller's last channel template
    templates_s: float | None = None
    #: the webhook's own histogram over the same spans as webhook_first and webhook_steady
    #: (``None``: not scraped)
    own_first: WebhookFigures | None = None
    own_steady: WebhookFigures | None = None
    #: where the host's CPU went from the first object to the last claim bound
    cpu: CpuSplit | None = None
    #: the allocation controller's reconciles over the same span (``None``: not scraped)
    reconciles: ReconcileSpan | None = None
    #: how many claims waited at least the claim-to-bound p99, by workload
    slowest: Mapping[str, int] = field(default_factory=dict)
    #: how many claims waited how long, by band (``scale_metrics.wait_bands``)
    wait_bands: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Churn:
    """Pods deleted and nodes replaced, until the workload is whole again."""

    deleted_pods: int
    replaced_nodes: int
    claims: int
    bound_p50: float | None
    bound_p99: float | None
    webhook: WebhookFigures
    requests: Mapping[str, float]
    seconds: float
    #: the webhook's own histogram over the churn (``None``: not scraped)
    own_webhook: WebhookFigures | None = None


@dataclass(frozen=True)
class Usage:
    """Our components' processes at a phase's start and end, and the seconds between."""

    start: Mapping[str, PodUsage]
    end: Mapping[str, PodUsage]
    seconds: float
    #: CPU seconds the allocation controller spent answering the benchmark's own scrapes of
    #: its ``/metrics`` (every 0.5 s, for the metrics lag; Prometheus scrapes every 15-60 s):
    #: the measured cost of one scrape at the phase's end times the scrapes made.
    scrape_cpu_s: float = 0.0
    #: the allocation controller's resident memory, sampled every few seconds and labelled
    #: with the benchmark's step (empty: not sampled)
    memory: Sequence[MemorySample] = ()
    #: the allocation controller's informers over the phase, by kind: full lists, and watches
    #: reopened (empty: its metrics not read)
    lists: Mapping[str, float] = field(default_factory=dict)
    watch_restarts: Mapping[str, float] = field(default_factory=dict)

    def cpu_s(self, component: str) -> float | None:
        """CPU seconds ``component`` used over the phase (``None``: not found)."""
        if component not in self.start or component not in self.end:
            return None
        return self.end[component].cpu_s - self.start[component].cpu_s

    def peak_mb(self, component: str) -> float | None:
        """``component``'s peak RSS since it started (the kernel's high-water mark), MB."""
        usage = self.end.get(component)
        return None if usage is None or not usage.processes else usage.peak_rss / _MB


@dataclass(frozen=True)
class Phase:
    """One phase's figures (``usage`` and ``metrics_lag`` only with our components)."""

    name: str
    creation: Creation
    churn: Churn
    #: wall seconds of ``kubectl dra explain``: (pending claim, allocated claim)
    explain: tuple[float, float]
    usage: Usage | None
    #: (lag of each claim, seconds; scrapes; failed scrapes)
    metrics_lag: tuple[Sequence[float], int, int] | None
    requests: Mapping[str, float]
    seconds: float


def _ms(value: float | None) -> str:
    return format_figure(None if value is None else value * 1000.0, "ms")


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("ok" if ok else "MISSED")


def _at_most(value: float | None, target: float) -> str:
    return _verdict(None if value is None else value <= target)


def _webhook_verdict(figures: WebhookFigures) -> str:
    """Judged by the bucket p99 falls in: the API server's buckets are 5, 25, 100 ms..., so
    a p99 inside (5, 25] ms cannot be told from the 20 ms target."""
    bucket = figures[3]
    target = WEBHOOK_P99_MS / 1000
    if bucket is None:
        return f"<= {WEBHOOK_P99_MS} ms: n/a"
    low, high = bucket
    span = f"p99 in ({low * 1000:g}, {high * 1000:g}] ms"
    if high <= target:
        return f"<= {WEBHOOK_P99_MS} ms: ok ({span})"
    if low >= target:
        return f"<= {WEBHOOK_P99_MS} ms: MISSED ({span})"
    return f"<= {WEBHOOK_P99_MS} ms: cannot tell ({span})"


def _own_verdict(figures: WebhookFigures | None) -> str:
    """Judged by the interpolated p99: the webhook's buckets are fine around the target and
    20 ms is one of their bounds, so the bucket it falls in agrees."""
    if figures is None:
        return "(not scraped)"
    bucket = figures[3]
    span = "" if bucket is None else f" (p99 in ({bucket[0] * 1000:g}, {bucket[1] * 1000:g}] ms)"
    return f"<= {WEBHOOK_P99_MS} ms: " + _at_most(figures[1], WEBHOOK_P99_MS / 1000) + span


def _webhook_rows(
    window: str, api: WebhookFigures, own: WebhookFigures | None
) -> list[tuple[str, str, str, str]]:
    """p50 and p99 of one window, as the API server saw each call and as the webhook timed
    each review, each row saying what its figure covers."""
    own_count = "?" if own is None else str(own[2])
    own_p50, own_p99 = (None, None) if own is None else (own[0], own[1])
    return [
        (
            f"webhook p50, {window} {api[2]} calls ({API_SERVER_SPAN})",
            "-",
            _ms(api[0]),
            "(reported)",
        ),
        (
            f"webhook p99, {window} {api[2]} calls ({API_SERVER_SPAN})",
            "-",
            _ms(api[1]),
            _webhook_verdict(api),
        ),
        (
            f"webhook p50, {window} {own_count} reviews ({WEBHOOK_SPAN})",
            "-",
            _ms(own_p50),
            "(reported)",
        ),
        (
            f"webhook p99, {window} {own_count} reviews ({WEBHOOK_SPAN})",
            "-",
            _ms(own_p99),
            _own_verdict(own),
        ),
    ]


def rows(without: Phase | None, with_: Phase) -> list[tuple[str, str, str, str]]:
    """``(figure, without, with, target and verdict)`` rows of the report.

    ``without`` is None when only the phase with our components ran (``SCALE_PHASES=with``):
    its column is empty and every target that compares the two phases is ``n/a``.
    """
    if without is None:
        return [
            (figure, "-", value, _uncompared(target))
            for figure, _, value, target in rows(with_, with_)
        ]
    wo, wi = without.creation, with_.creation
    out = [
        ("pods scheduled", str(wo.scheduled), str(wi.scheduled), "all"),
        ("ComputeDomains (4 nodes)", str(wo.domains), str(wi.domains), "(in the mix)"),
        (
            "domains to channel templates",
            "(written by the bench)",
            format_figure(wi.templates_s, "s", 2),
            "(reported)",
        ),
        (
            "pods/s scheduled",
            format_figure(wo.pods_per_s, ""),
            format_figure(wi.pods_per_s, ""),
            "with >= 95% of without: " + ratio_ok(wo.pods_per_s, wi.pods_per_s, most=1 / 0.95),
        ),
        ("claim-to-bound p50", _ms(wo.bound_p50), _ms(wi.bound_p50), "(reported)"),
        (
            "claim-to-bound p99",
            _ms(wo.bound_p99),
            _ms(wi.bound_p99),
            "with <= 110% of without: " + ratio_ok(wi.bound_p99, wo.bound_p99, most=1.10),
        ),
    ]
    out += _webhook_rows("first", wi.webhook_first, wi.own_first)
    out += _webhook_rows("next", wi.webhook_steady, wi.own_steady)
    out += _webhook_rows("churn", with_.churn.webhook, with_.churn.own_webhook)
    cw, ci = without.churn, with_.churn
    out += [
        (
            "churn: pods deleted, nodes replaced",
            f"{cw.deleted_pods}, {cw.replaced_nodes}",
            f"{ci.deleted_pods}, {ci.replaced_nodes}",
            "(reported)",
        ),
        ("churn: whole again after", f"{cw.seconds:.0f} s", f"{ci.seconds:.0f} s", "(reported)"),
        ("churn: claim-to-bound p50", _ms(cw.bound_p50), _ms(ci.bound_p50), "(reported)"),
        (
            "churn: claim-to-bound p99",
            _ms(cw.bound_p99),
            _ms(ci.bound_p99),
            "with <= 110% of without: " + ratio_ok(ci.bound_p99, cw.bound_p99, most=1.10),
        ),
    ]
    out += _usage_rows(with_)
    out += _reconcile_rows(with_.creation)
    out += _lag_rows(with_)
    for index, which in enumerate(("pending", "allocated")):
        out.append(
            (
                f"kubectl dra explain, {which} claim",
                f"{without.explain[index]:.2f} s",
                f"{with_.explain[index]:.2f} s",
                f"<= {EXPLAIN_S:g} s: "
                + _verdict(max(without.explain[index], with_.explain[index]) <= EXPLAIN_S),
            )
        )
    ours = with_.requests.get(COMPONENTS_FLOW_SCHEMA, 0.0)
    per_minute = ours / (with_.seconds / 60) if with_.seconds > 0 else None
    out.append(
        ("our components' API requests/min", "-", format_figure(per_minute, "", 0), "(reported)")
    )
    return out


def _uncompared(target: str) -> str:
    """A target judged against the phase without our components, when there is none."""
    if "of without:" not in target:
        return target
    return target.rsplit(": ", 1)[0] + ": n/a (no without phase)"


def _usage_rows(phase: Phase) -> list[tuple[str, str, str, str]]:
    usage = phase.usage
    if usage is None:
        return []
    out = []
    for component in sorted(usage.end):
        cpu = usage.cpu_s(component)
        cores = None if cpu is None or usage.seconds <= 0 else cpu / usage.seconds
        peak = usage.peak_mb(component)
        cpu_target = rss_target = "(reported)"
        if component == ALLOCATION_CONTROLLER:
            cpu_target = f"<= {ALLOCATION_CORES:g} core: " + _at_most(cores, ALLOCATION_CORES)
            rss_target = f"<= {ALLOCATION_RSS_MB} MB: " + _at_most(peak, ALLOCATION_RSS_MB)
        cpu_text = "n/a" if cpu is None else f"{cpu:.1f} s = {cores:.3f} core"
        if component == ALLOCATION_CONTROLLER and cpu is not None and usage.scrape_cpu_s > 0:
            # The target is the controller's own work: judged without the benchmark's scrapes.
            out.append((f"{component} CPU, all", "-", cpu_text, "(reported)"))
            net = max(0.0, cpu - usage.scrape_cpu_s)
            cores = None if usage.seconds <= 0 else net / usage.seconds
            cpu_target = f"<= {ALLOCATION_CORES:g} core: " + _at_most(cores, ALLOCATION_CORES)
            cpu_text = f"{net:.1f} s = {cores:.3f} core"
            out.append(
                (
                    f"{component} CPU, bench scrapes",
                    "-",
                    f"{usage.scrape_cpu_s:.1f} s",
                    "(reported)",
                )
            )
            component_label = f"{component} CPU, less scrapes"
        else:
            component_label = f"{component} CPU"
        out.append((component_label, "-", cpu_text, cpu_target))
        out.append((f"{component} peak RSS", "-", format_figure(peak, "MB"), rss_target))
    return out


def _reconcile_rows(creation: Creation) -> list[tuple[str, str, str, str]]:
    """How often and how long the allocation controller reconciled during the creation: its
    reconciles are paced to a share of the time (``Settings.max_busy``), so their summed wall
    time against the span says whether the rest of its CPU is spent elsewhere."""
    span = creation.reconciles
    if span is None:
        return []
    share = span.seconds / creation.seconds if creation.seconds > 0 else None
    return [
        (
            f"{ALLOCATION_CONTROLLER} reconciles, creation",
            "-",
            str(span.count),
            "(reported)",
        ),
        (
            f"{ALLOCATION_CONTROLLER} reconcile p50 / p99",
            "-",
            f"{_ms(span.p50)} / {_ms(span.p99)}",
            "(reported)",
        ),
        (
            f"{ALLOCATION_CONTROLLER} reconciling, creation",
            "-",
            f"{span.seconds:.1f} s = " + ("n/a" if share is None else f"{share:.1%}"),
            "(reported: wall time)",
        ),
    ]


def _lag_rows(phase: Phase) -> list[tuple[str, str, str, str]]:
    if phase.metrics_lag is None:
        return [("metrics lag p99", "-", "n/a", "(not scraped)")]
    values, scrapes, failures = phase.metrics_lag
    p99 = percentile(values, 0.99)
    return [
        (
            f"metrics lag p50 ({len(values)} claims)",
            "-",
            _ms(percentile(values, 0.5)),
            "(reported)",
        ),
        (
            f"metrics lag p99 ({scrapes} scrapes, {failures} failed)",
            "-",
            _ms(p99),
            f"<= {METRICS_LAG_P99_S:g} s: " + _at_most(p99, METRICS_LAG_P99_S),
        ),
    ]


def scheduler_rows(without: Phase) -> list[tuple[str, str]]:
    """``(figure, value)`` of the phase without our components alone (``SCALE_PHASES=without``):
    the figures the full report compares the other phase's with."""
    creation, churn = without.creation, without.churn
    return [
        ("pods scheduled, claims bound", f"{creation.scheduled}, {creation.claims}"),
        ("pods/s scheduled", format_figure(creation.pods_per_s, "")),
        ("claim-to-bound p50", _ms(creation.bound_p50)),
        ("claim-to-bound p99", _ms(creation.bound_p99)),
        ("churn: pods deleted, nodes replaced", f"{churn.deleted_pods}, {churn.replaced_nodes}"),
        ("churn: whole again after", f"{churn.seconds:.0f} s"),
        ("churn: claim-to-bound p50", _ms(churn.bound_p50)),
        ("churn: claim-to-bound p99", _ms(churn.bound_p99)),
        ("kubectl dra explain, pending claim", f"{without.explain[0]:.2f} s"),
        ("kubectl dra explain, allocated claim", f"{without.explain[1]:.2f} s"),
    ]


def render(
    without: Phase | None, with_: Phase, *, nodes: int, gpus: int, pods: int, rate: float, cpus: int
) -> str:
    """The whole report: the table, the API requests per FlowSchema of each phase, then where
    the host's CPU went during each phase's creation."""
    table = rows(without, with_)
    width = max(len(row[0]) for row in table)
    lines = [
        f"scale: {nodes} kwok nodes x {gpus} GPUs, {pods} pods asked for at {rate:g}/s, "
        f"1 real node, {cpus} CPUs",
        f"{'figure':{width}} {'without':>14} {'with':>22}  target (issue #27)",
    ]
    lines += [f"{a:{width}} {b:>14} {c:>22}  {d}" for a, b, c, d in table]
    lines.append(
        "\nAPI requests dispatched by FlowSchema (the API server has no user-agent label):"
    )
    for phase in (without, with_):
        if phase is None:
            continue
        counts = ", ".join(f"{k}={v:.0f}" for k, v in top(phase.requests))
        lines.append(f"  {phase.name} ({phase.seconds:.0f} s): {counts}")
    ours = with_.requests.get(COMPONENTS_FLOW_SCHEMA, 0.0)
    lines.append(f"  our components ({COMPONENTS_FLOW_SCHEMA}): {ours:.0f} requests in the phase")
    slow = [p for p in (without, with_) if p is not None and p.creation.slowest]
    if slow:
        lines.append("\nclaims at or over the creation's claim-to-bound p99, by workload:")
    for phase in slow:
        counts = ", ".join(f"{k}={v}" for k, v in sorted(phase.creation.slowest.items()))
        lines.append(f"  {phase.name}: {counts}")
    banded = [p for p in (without, with_) if p is not None and p.creation.wait_bands]
    if banded:
        lines.append("\nclaims by claim-to-bound during the creation:")
    for phase in banded:
        counts = ", ".join(f"{k}: {v}" for k, v in phase.creation.wait_bands.items())
        lines.append(f"  {phase.name}: {counts}")
    lines += memory_lines(with_.usage)
    lines += ["", *creation_cpu_lines(without, with_)]
    return "\n".join(lines)


def memory_lines(usage: Usage | None) -> list[str]:
    """When the allocation controller's memory rose (its peak RSS is a high-water mark, which
    says how high, not when), and the full lists its informers made: a relist holds the old
    objects and the new list at once."""
    if usage is None or (not usage.memory and not usage.lists):
        return []
    lines = [f"\n{ALLOCATION_CONTROLLER} resident memory by step (sampled):"]
    lines += [f"  {line}" for line in describe(by_step(usage.memory)).splitlines()]
    if usage.memory:
        shape = ", ".join(f"{s.rss / _MB:.0f}" for s in thinned(usage.memory, TIMELINE_S))
        lines.append(f"  every {TIMELINE_S:g} s, MB: {shape}")
    for title, counts in (("full lists", usage.lists), ("watches reopened", usage.watch_restarts)):
        text = ", ".join(f"{k}={v:.0f}" for k, v in sorted(counts.items())) or "(not read)"
        lines.append(f"  {title} over the phase, by kind: {text}")
    return lines


def creation_cpu_lines(without: Phase | None, with_: Phase | None) -> list[str]:
    """Where the host's CPU went during each phase's creation (nothing: not measured)."""
    return cpu_lines(
        "host CPU during the creation, by process",
        None if without is None else without.creation.cpu,
        None if with_ is None else with_.creation.cpu,
    )


_EXPLAINED = re.compile(
    r"explained target=\S+ fetch_s=(?P<fetch>[\d.]+) read_s=(?P<read>[\d.]+) "
    r"explain_s=(?P<explain>[\d.]+)"
)


def explain_split(wall_s: float, log: str) -> str:
    """``kubectl dra explain``'s wall time split as its ``-v 1`` log says: the cluster's
    lists, reading them, the explanation, and the rest (the process's start and imports,
    its output and exit): ``4.21 s = fetch 2.10 + read 0.61 + explain 0.40 + start/exit
    1.10``; the wall time alone when the log has no such line."""
    found = _EXPLAINED.search(log)
    if found is None:
        return f"{wall_s:.2f} s (no timings logged)"
    parts = {k: float(v) for k, v in found.groupdict().items()}
    rest = wall_s - sum(parts.values())
    split = " + ".join(f"{k} {v:.2f}" for k, v in parts.items())
    return f"{wall_s:.2f} s = {split} + start/exit {rest:.2f}"
