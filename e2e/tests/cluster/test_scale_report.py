"""The scale benchmark's report: each figure without and with, against issue #27's target."""

from __future__ import annotations

from dataclasses import replace

from dra_e2e.host_cpu import CpuReading, HostTotals, split
from dra_e2e.pod_usage import PodUsage, ProcessUsage
from dra_e2e.scale_metrics import ReconcileSpan
from dra_e2e.scale_report import (
    API_SERVER_SPAN,
    WEBHOOK_SPAN,
    Churn,
    Creation,
    Phase,
    Usage,
    explain_split,
    render,
    rows,
    scheduler_rows,
)


def _pod(cpu_s: float, peak_mb: float) -> PodUsage:
    return PodUsage((ProcessUsage(1, "python", cpu_s, 1, int(peak_mb * 1_000_000)),))


def _phase(
    name: str,
    *,
    pods_per_s: float,
    p99: float,
    usage: Usage | None = None,
    lag: list[float] | None = None,
    explain: float = 1.0,
    own: bool = False,
    slowest: dict[str, int] | None = None,
    bands: dict[str, int] | None = None,
) -> Phase:
    creation = Creation(
        pods_per_s=pods_per_s,
        scheduled=200,
        claims=208,
        domains=2,
        bound_p50=0.2,
        bound_p99=p99,
        webhook_first=(0.002, 0.4, 30, (0.1, 0.5)),
        webhook_steady=(0.001, 0.004, 170, (0, 0.005)),
        requests={"dra-driver-components": 60.0},
        seconds=50,
        own_first=(0.0021, 0.0182, 31, (0.015, 0.02)) if own else None,
        own_steady=(0.0012, 0.0034, 170, (0.003, 0.005)) if own else None,
        slowest=slowest or {},
        wait_bands=bands or {},
    )
    churn = Churn(
        deleted_pods=20,
        replaced_nodes=5,
        claims=40,
        bound_p50=0.3,
        bound_p99=p99,
        webhook=(0.001, 0.024, 40, (0.005, 0.025)),
        requests={},
        seconds=70,
        own_webhook=(0.0011, 0.0213, 40, (0.02, 0.025)) if own else None,
    )
    return Phase(
        name=name,
        creation=creation,
        churn=churn,
        explain=(explain, explain / 2),
        usage=usage,
        metrics_lag=None if lag is None else (lag, 100, 1),
        requests={"dra-driver-components": 120.0, "exempt": 500.0},
        seconds=120,
    )


def test_rows_judge_each_figure_against_its_target() -> None:
    usage = Usage(
        start={"allocation-controller": _pod(10, 90), "webhook": _pod(1, 40)},
        end={"allocation-controller": _pod(40, 120), "webhook": _pod(3, 45)},
        seconds=120,
    )
    without = _phase("without", pods_per_s=5.0, p99=1.0)
    with_ = _phase(
        "with",
        pods_per_s=4.9,
        p99=1.2,
        usage=usage,
        lag=[0.3] * 99 + [2.5],
        explain=4.0,
        own=True,
    )
    table = {r[0]: r[1:] for r in rows(without, with_)}
    assert table["domains to channel templates"][1] == "n/a"
    assert table["pods/s scheduled"] == ("5.0", "4.9", "with >= 95% of without: ok")
    assert table["claim-to-bound p99"][2] == "with <= 110% of without: MISSED"
    api, own = f"({API_SERVER_SPAN})", f"({WEBHOOK_SPAN})"
    assert "TLS, network, queueing" in api
    assert "parse+validate+write" in own
    assert table[f"webhook p50, first 30 calls {api}"] == ("-", "2.0 ms", "(reported)")
    assert table[f"webhook p99, first 30 calls {api}"] == (
        "-",
        "400.0 ms",
        "<= 20 ms: MISSED (p99 in (100, 500] ms)",
    )
    assert table[f"webhook p50, first 31 reviews {own}"] == ("-", "2.1 ms", "(reported)")
    assert table[f"webhook p99, first 31 reviews {own}"] == (
        "-",
        "18.2 ms",
        "<= 20 ms: ok (p99 in (15, 20] ms)",
    )
    assert table[f"webhook p99, next 170 calls {api}"] == (
        "-",
        "4.0 ms",
        "<= 20 ms: ok (p99 in (0, 5] ms)",
    )
    assert table[f"webhook p99, next 170 reviews {own}"][2] == ("<= 20 ms: ok (p99 in (3, 5] ms)")
    # The API server's buckets cannot place this p99; the webhook's own can.
    assert table[f"webhook p99, churn 40 calls {api}"][2] == (
        "<= 20 ms: cannot tell (p99 in (5, 25] ms)"
    )
    assert table[f"webhook p99, churn 40 reviews {own}"] == (
        "-",
        "21.3 ms",
        "<= 20 ms: MISSED (p99 in (20, 25] ms)",
    )
    assert table["allocation-controller CPU"] == ("-", "30.0 s = 0.250 core", "<= 0.5 core: ok")
    assert table["allocation-controller peak RSS"] == ("-", "120.0 MB", "<= 300 MB: ok")
    assert table["webhook peak RSS"] == ("-", "45.0 MB", "(reported)")
    assert table["metrics lag p99 (100 scrapes, 1 failed)"] == ("-", "300.0 ms", "<= 2 s: ok")
    assert table["kubectl dra explain, pending claim"] == ("1.00 s", "4.00 s", "<= 3 s: MISSED")
    assert table["kubectl dra explain, allocated claim"][2] == "<= 3 s: ok"
    assert table["our components' API requests/min"] == ("-", "60", "(reported)")
    text = render(without, with_, nodes=50, gpus=8, pods=200, rate=5, cpus=2)
    assert "50 kwok nodes x 8 GPUs, 200 pods asked for at 5/s" in text
    assert "our components (dra-driver-components): 120 requests in the phase" in text


def test_a_phase_without_scrapes_or_usage_says_so() -> None:
    phase = _phase("with", pods_per_s=5.0, p99=1.0)
    table = {r[0]: r[1:] for r in rows(phase, phase)}
    assert table["metrics lag p99"] == ("-", "n/a", "(not scraped)")
    assert table[f"webhook p99, churn ? reviews ({WEBHOOK_SPAN})"] == (
        "-",
        "n/a",
        "(not scraped)",
    )
    assert not [k for k in table if k.endswith("peak RSS")]
    assert not [k for k in table if "reconcil" in k]


def test_allocation_controller_cpu_is_judged_without_the_benchmarks_scrapes() -> None:
    usage = Usage(
        start={"allocation-controller": _pod(10, 90)},
        end={"allocation-controller": _pod(100, 120)},
        seconds=120,
        scrape_cpu_s=60.0,
    )
    with_ = _phase("with", pods_per_s=5.0, p99=1.0, usage=usage)
    table = {r[0]: r[1:] for r in rows(_phase("without", pods_per_s=5.0, p99=1.0), with_)}
    assert table["allocation-controller CPU, all"] == ("-", "90.0 s = 0.750 core", "(reported)")
    assert table["allocation-controller CPU, bench scrapes"] == ("-", "60.0 s", "(reported)")
    assert table["allocation-controller CPU, less scrapes"] == (
        "-",
        "30.0 s = 0.250 core",
        "<= 0.5 core: ok",
    )
    assert "allocation-controller CPU" not in table


def test_only_the_phase_with_our_components_leaves_the_comparisons_open() -> None:
    usage = Usage(
        start={"allocation-controller": _pod(10, 90)},
        end={"allocation-controller": _pod(40, 320)},
        seconds=120,
    )
    with_ = _phase("with", pods_per_s=4.0, p99=1.2, usage=usage, lag=[0.3] * 100, explain=4.0)
    table = {r[0]: r[1:] for r in rows(None, with_)}
    assert table["pods/s scheduled"] == (
        "-",
        "4.0",
        "with >= 95% of without: n/a (no without phase)",
    )
    assert table["claim-to-bound p99"] == (
        "-",
        "1200.0 ms",
        "with <= 110% of without: n/a (no without phase)",
    )
    assert table["churn: claim-to-bound p99"][2] == (
        "with <= 110% of without: n/a (no without phase)"
    )
    # Targets of the phase's own figures are still judged.
    assert table["allocation-controller peak RSS"] == ("-", "320.0 MB", "<= 300 MB: MISSED")
    assert table["kubectl dra explain, pending claim"] == ("-", "4.00 s", "<= 3 s: MISSED")
    assert table["kubectl dra explain, allocated claim"] == ("-", "2.00 s", "<= 3 s: ok")
    assert all(without == "-" for without, _, _ in table.values())
    text = render(None, with_, nodes=50, gpus=8, pods=200, rate=5, cpus=2)
    assert "  with (120 s):" in text
    assert "  without (" not in text


def test_the_phase_without_our_components_alone_gives_its_scheduler_figures() -> None:
    without = _phase("without", pods_per_s=7.6, p99=1.5, explain=2.0)
    table = dict(scheduler_rows(without))
    assert table["pods scheduled, claims bound"] == "200, 208"
    assert table["pods/s scheduled"] == "7.6"
    assert table["claim-to-bound p50"] == "200.0 ms"
    assert table["claim-to-bound p99"] == "1500.0 ms"
    assert table["churn: pods deleted, nodes replaced"] == "20, 5"
    assert table["churn: claim-to-bound p99"] == "1500.0 ms"
    assert table["kubectl dra explain, pending claim"] == "2.00 s"
    assert table["kubectl dra explain, allocated claim"] == "1.00 s"


def test_the_report_ends_with_where_the_host_cpu_went_during_each_creation() -> None:
    def with_cpu(phase: Phase, scheduler_s: float, ours_s: float) -> Phase:
        processes = {"kube-scheduler": 0.0, **({"ours: webhook": 0.0} if ours_s else {})}
        start = CpuReading(processes, HostTotals(0.0, 0.0, 0.0))
        end = CpuReading(
            {"kube-scheduler": scheduler_s, **({"ours: webhook": ours_s} if ours_s else {})},
            HostTotals(90.0, 10.0, 5.0),
        )
        return replace(phase, creation=replace(phase.creation, cpu=split(start, end, 50.0)))

    without = with_cpu(_phase("without", pods_per_s=5.0, p99=1.0), 40.0, 0.0)
    with_ = with_cpu(_phase("with", pods_per_s=4.0, p99=1.2), 30.0, 5.0)
    lines = render(without, with_, nodes=50, gpus=8, pods=200, rate=5, cpus=2).splitlines()
    at = lines.index("host CPU during the creation, by process (50 s / 50 s):")
    assert [line.split() for line in lines[at + 2 :]] == [
        ["kube-scheduler", "0.80", "core", "0.60", "core"],
        ["ours:", "webhook", "n/a", "0.10", "core"],
        ["other", "1.00", "core", "1.10", "core"],
        ["idle", "0.20", "core", "0.20", "core"],
        ["steal", "0.10", "core", "0.10", "core"],
    ]
    # A phase without the reading (an older benchmark's phase) prints no CPU table.
    text = render(
        None, _phase("with", pods_per_s=4.0, p99=1.2), nodes=1, gpus=1, pods=1, rate=1, cpus=2
    )
    assert "host CPU" not in text


def test_the_controllers_reconciles_during_the_creation_are_reported() -> None:
    with_ = _phase("with", pods_per_s=5.0, p99=1.0)
    span = ReconcileSpan(count=80, seconds=2.5, p50=0.02, p99=0.09)
    with_ = replace(with_, creation=replace(with_.creation, reconciles=span))
    table = {r[0]: r[1:] for r in rows(_phase("without", pods_per_s=5.0, p99=1.0), with_)}
    assert table["allocation-controller reconciles, creation"] == ("-", "80", "(reported)")
    assert table["allocation-controller reconcile p50 / p99"] == (
        "-",
        "20.0 ms / 90.0 ms",
        "(reported)",
    )
    # 2.5 s of the creation's 50 s.
    assert table["allocation-controller reconciling, creation"] == (
        "-",
        "2.5 s = 5.0%",
        "(reported: wall time)",
    )


def test_the_slowest_claims_are_counted_by_workload_under_the_table() -> None:
    without = _phase("without", pods_per_s=5.0, p99=1.0)
    with_ = _phase("with", pods_per_s=5.0, p99=9.0, slowest={"mig-1g": 1, "domain": 2})
    lines = render(without, with_, nodes=50, gpus=8, pods=200, rate=5, cpus=2).splitlines()
    at = lines.index("claims at or over the creation's claim-to-bound p99, by workload:")
    assert lines[at + 1] == "  with: domain=2, mig-1g=1"
    quiet = render(without, without, nodes=50, gpus=8, pods=200, rate=5, cpus=2)
    assert "claim-to-bound p99, by workload" not in quiet


def test_claims_by_wait_band_are_printed_for_each_phase_under_the_table() -> None:
    without = _phase("without", pods_per_s=5.0, p99=1.0, bands={"< 0.5 s": 190, "2-10 s": 18})
    with_ = _phase("with", pods_per_s=5.0, p99=1.0, bands={"< 0.5 s": 200, "2-10 s": 8})
    lines = render(without, with_, nodes=50, gpus=8, pods=200, rate=5, cpus=2).splitlines()
    at = lines.index("claims by claim-to-bound during the creation:")
    assert lines[at + 1 : at + 3] == [
        "  without: < 0.5 s: 190, 2-10 s: 18",
        "  with: < 0.5 s: 200, 2-10 s: 8",
    ]
    plain = _phase("with", pods_per_s=5.0, p99=1.0)
    quiet = render(None, plain, nodes=50, gpus=8, pods=200, rate=5, cpus=2)
    assert "by claim-to-bound during" not in quiet


def test_explain_split_names_each_part_and_the_rest() -> None:
    log = (
        "INFO kubectl_dra.live: fetched path=/api/v1/nodes items=1000\n"
        "INFO kubectl_dra.cli: explained target=resourceclaim/x "
        "fetch_s=2.100 read_s=0.610 explain_s=0.400\n"
    )
    assert explain_split(4.21, log) == (
        "4.21 s = fetch 2.10 + read 0.61 + explain 0.40 + start/exit 1.10"
    )
    assert explain_split(3.0, "error: boom\n") == "3.00 s (no timings logged)"
