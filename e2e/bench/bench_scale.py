"""Scale: simulated GPU nodes (kwok) on the harness's real control plane, with and without our
control-plane components (allocation controller, webhook, ComputeDomain controller).

On demand only (``make bench BENCH=scale``; the unfiltered ``make bench`` leaves it out): it
needs root and starts a cluster. Sizes come from the environment: ``SCALE_NODES`` (1000),
``SCALE_PODS`` (5000), ``SCALE_GPUS`` (GPUs per node, 8), ``SCALE_RATE`` (pods asked for
per second, 5), ``SCALE_CHURN`` (percent of pods deleted and of nodes replaced in the churn,
10), ``SCALE_TIMEOUT_S`` (per step, 1800). One run does both phases on one cluster, without
the chart first, then with it; ``SCALE_PHASES=with`` runs only the second (half the time, for
our components' own figures: their CPU, memory, metrics lag and explain; the comparisons
with the first phase are then ``n/a``), ``SCALE_PHASES=without`` only the first (its
scheduler figures alone, to compare by hand with a ``with`` run). Each phase:

1. creates the workload's Deployments at zero replicas (whole GPUs, MIG devices, time-sliced
   GPUs, and 4-node ComputeDomains whose pods take a channel and a GPU) and raises them at
   ``SCALE_RATE`` pods/s until ``SCALE_PODS`` are asked for, then waits until every pod is
   scheduled and every claim allocated and reserved;
2. times ``kubectl dra explain`` on one pending and one allocated claim;
3. churns: deletes ``SCALE_CHURN`` % of the pods at the same rate (their ReplicaSets make new
   ones), deletes as many % of the kwok nodes and adds as many new ones, and waits until the
   workload is whole again.

Figures (each printed next to issue #27's target): pods/s scheduled, claim-to-bound
p50/p99 (creation, churn), webhook admission p50/p99 (the first calls after install apart from
the rest of the creation, and the churn), each window twice: the API server's histogram (a
call's whole span: TLS, network, queueing and the review; buckets too coarse to place p99
against 20 ms) and the webhook's own ``dra_webhook_review_duration_seconds`` (the review
inside the webhook: body read, parse, validate, response written; fine buckets), scraped from
each webhook pod at the moments the API server's is read, API requests per FlowSchema (our
components' service accounts get one of their own), our controllers' CPU seconds and peak
RSS (from /proc: their pods run on this host), the metrics lag (a claim's allocation, seen by
a watch, to its first scrape in our allocation controller's metrics; the scrapes run in a
child process at nice 19, :mod:`dra_e2e.scale_scrape`, so they yield to the cluster on a
saturated host) and explain's wall time.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dra_e2e import chart, driver_install
from dra_e2e.cluster import Cluster
from dra_e2e.host_cpu import split
from dra_e2e.kwok_cluster import add_kwok_nodes, delete_kwok_nodes, list_kwok_nodes, transport_of
from dra_e2e.kwok_slices import FLEET_LABEL, GB200
from dra_e2e.process import write_bytecode
from dra_e2e.scale_components import (
    component_usage,
    controller_text,
    cpu_reading,
    measured,
    rss_reader,
    scrape_cpu_s,
    scrape_url,
    webhook_texts,
)
from dra_e2e.scale_domains import (
    DOMAIN_NODES,
    DOMAIN_PREFIX,
    channel_device_class,
    channel_template_name,
    compute_domain,
    domain_count,
    domain_deployment,
    domain_name,
    stand_in_channel_template,
)
from dra_e2e.scale_metrics import (
    DISPATCHED,
    WEBHOOK_HISTOGRAM,
    WEBHOOK_REVIEW_HISTOGRAM,
    components_flow_schema,
    delta,
    histogram_figures,
    informer_counts,
    lags,
    parse_samples,
    percentile,
    reconcile_span,
    slowest_by_workload,
    sum_by,
    wait_bands,
)
from dra_e2e.scale_observe import ClaimWatch
from dra_e2e.scale_report import (
    Churn,
    Creation,
    Phase,
    Usage,
    WebhookFigures,
    creation_cpu_lines,
    explain_split,
    render,
    scheduler_rows,
)
from dra_e2e.scale_schedule import due, interleave, replicas_after
from dra_e2e.scale_scrape import MetricsScraper
from dra_e2e.scale_workload import (
    APP_LABEL,
    TEMPLATES,
    claim_template,
    deployment,
    device_classes,
    pending_claim,
    replicas,
)
from dra_kube_client import KubeApiError, KubeTransport


def _env(name: str, default: float) -> float:
    return float(os.environ.get(name, str(default)))


NODES = int(_env("SCALE_NODES", 1000))
PODS = int(_env("SCALE_PODS", 5000))
GPUS = int(_env("SCALE_GPUS", 8))
#: Pods asked for per second. The harness's controller-manager writes each pod and its
#: claim at its default 20 QPS: about 10 pods/s at most; 5 keeps the run below that queue.
RATE = _env("SCALE_RATE", 5)
CHURN = _env("SCALE_CHURN", 10)
TIMEOUT_S = _env("SCALE_TIMEOUT_S", 1800)
PHASES = os.environ.get("SCALE_PHASES", "both")
#: The first reviews after install, apart from the steady state's: those of the templates
#: and of this many pods' claims.
FIRST_CALL_PODS = 20
#: The chart with every control-plane component on: the allocation controller (on by
#: default; plain-HTTP metrics, so the benchmark's scrapes cost no TokenReview), the webhook
#: (TLS from a chart-made Secret; the time-slicing gate on so it admits that config; its own
#: review histogram on its plain-HTTP metrics port) and the ComputeDomain controller.
COMPONENTS = {
    "webhook.enabled": "true",
    "webhook.tls.mode": "secret",
    "webhook.metrics.enabled": "true",
    "featureGates.TimeSlicingSettings": "true",
    "resources.computeDomains.enabled": "true",
    "allocationController.metrics.insecure": "true",
}
SCRAPE_INTERVAL_S = 0.5
#: How often the workload is listed whole to see whether it is (two lists of PODS objects
#: and the nodes: at 5,000 pods, tens of MB of JSON a time on the same CPUs as the cluster).
WHOLE_CHECK_S = max(2.0, PODS / 500)


def say(message: str) -> None:
    """Print a progress line to stderr at once."""
    print(message, file=sys.stderr, flush=True)


def _metrics(cluster: Cluster) -> str:
    return cluster.kubectl("get", "--raw", "/metrics", timeout=60)


def _apply(cluster: Cluster, objects: list[dict[str, Any]], namespace: str | None = None) -> None:
    args = ["apply", "-f", "-"] + (["-n", namespace] if namespace else [])
    cluster.kubectl(*args, input_text="\n".join(json.dumps(o) for o in objects), timeout=120)


def _webhook(before: str, after: str) -> WebhookFigures:
    return histogram_figures(WEBHOOK_HISTOGRAM, {"apiserver": before}, {"apiserver": after})


def _own_webhook(
    before: dict[str, str] | None, after: dict[str, str] | None
) -> WebhookFigures | None:
    """The webhook pods' own review histogram over a span (``None``: not scraped)."""
    if before is None or after is None:
        return None
    return histogram_figures(WEBHOOK_REVIEW_HISTOGRAM, before, after)


def _requests(before: str, after: str) -> dict[str, float]:
    return sum_by(
        delta(parse_samples(before, DISPATCHED), parse_samples(after, DISPATCHED)), "flow_schema"
    )


@dataclass
class Workload:
    """A phase's Deployments and how many pods each ends with."""

    namespace: str
    domains: int
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def claims(self) -> int:
        """Claims of the whole workload: one per pod, two per domain pod."""
        return PODS + self.domains * DOMAIN_NODES


def _workload(namespace: str, gb200_nodes: int) -> Workload:
    domains = domain_count(PODS, gb200_nodes)
    work = Workload(namespace, domains)
    work.counts = replicas(PODS - domains * DOMAIN_NODES)
    work.counts.update({domain_name(i): DOMAIN_NODES for i in range(domains)})
    return work


def _setup(
    cluster: Cluster, transport: KubeTransport, work: Workload, with_components: bool
) -> float | None:
    """Templates (and domains), then the Deployments at zero replicas; with our components,
    return the seconds the ComputeDomain controller took to write every channel template."""
    ns = work.namespace
    objects: list[dict[str, Any]] = [claim_template(k, ns) for k in TEMPLATES]
    for i in range(work.domains):
        # With the chart the ComputeDomain controller writes the channel template.
        objects.append(
            compute_domain(i, ns) if with_components else stand_in_channel_template(i, ns)
        )
    started = time.monotonic()
    _apply(cluster, objects, ns)
    templates_s = None
    if with_components and work.domains:
        # A pod whose template is missing waits in the resourceclaim controller's backoff:
        # the pods are asked for once the controller has written every channel template.
        wanted = {channel_template_name(i) for i in range(work.domains)}
        path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates"

        def written() -> bool:
            items = transport.request("GET", path).get("items") or []
            return wanted <= {t["metadata"]["name"] for t in items}

        templates_s = _wait("channel templates of the ComputeDomains", written, 120, 0.2) - started
    objects = [deployment(k, ns, 0) for k in TEMPLATES]
    objects += [domain_deployment(i, ns, 0) for i in range(work.domains)]
    _apply(cluster, objects, ns)
    return templates_s


def _scale(transport: KubeTransport, ns: str, name: str, count: int) -> None:
    transport.request(
        "PATCH",
        f"/apis/apps/v1/namespaces/{ns}/deployments/{name}",
        body={"spec": {"replicas": count}},
        content_type="application/merge-patch+json",
    )


def _ask_at_rate(transport: KubeTransport, work: Workload, on_count: Any) -> None:
    """Raise the Deployments so that ``RATE`` pods/s are asked for, until all are."""
    order = interleave(work.counts)
    names = list(work.counts)
    asked = dict.fromkeys(names, 0)
    started = time.monotonic()
    n = 0
    while n < len(order):
        n = due(RATE, time.monotonic() - started, len(order))
        for name, count in replicas_after(order, n, names).items():
            if count != asked[name]:
                _scale(transport, work.namespace, name, count)
                asked[name] = count
        on_count(n)
        time.sleep(min(1.0, 1.0 / RATE))


def _live(transport: KubeTransport, ns: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    pods = transport.request("GET", f"/api/v1/namespaces/{ns}/pods").get("items") or []
    claims = (
        transport.request("GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims").get(
            "items"
        )
        or []
    )
    alive = [
        o
        for o in pods
        if APP_LABEL in (o["metadata"].get("labels") or {})
        and not o["metadata"].get("deletionTimestamp")
    ]
    owned = [
        c
        for c in claims
        if any(r.get("kind") == "Pod" for r in c["metadata"].get("ownerReferences") or [])
        and not c["metadata"].get("deletionTimestamp")
    ]
    return alive, owned


def _whole(transport: KubeTransport, work: Workload) -> bool:
    """Every pod of the workload live and scheduled, every claim of theirs allocated and
    reserved."""
    pods, claims = _live(transport, work.namespace)
    # A pod of a deleted node is not deleted until the pod GC's quarantine ends: not whole.
    nodes = {n["metadata"]["name"] for n in list_kwok_nodes(transport)}
    scheduled = [p for p in pods if (p.get("spec") or {}).get("nodeName") in nodes]
    bound = [
        c
        for c in claims
        if (c.get("status") or {}).get("allocation") and (c.get("status") or {}).get("reservedFor")
    ]
    return len(pods) == len(scheduled) == PODS and len(claims) == len(bound) == work.claims


def _watched_whole(watch: ClaimWatch, work: Workload) -> bool:
    """What the watches saw already says the creation may be done: every pod got a node and
    every claim was bound (cheap; the lists of :func:`_whole` then confirm it)."""
    return len(watch.scheduled) >= PODS and len(watch.claim_bound) >= work.claims


def _wait(
    what: str, check: Any, timeout: float = TIMEOUT_S, interval: float = WHOLE_CHECK_S
) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not after {timeout:.0f} s")
        time.sleep(interval)
    return time.monotonic()


def _explain(cluster: Cluster, ns: str, claim: str) -> float:
    """Wall seconds of ``kubectl dra explain resourceclaim/<claim>`` against the cluster."""
    binary = Path(sys.executable).parent / "kubectl-dra"
    started = time.monotonic()
    proc = subprocess.run(
        [
            str(binary),
            "explain",
            f"resourceclaim/{claim}",
            "-n",
            ns,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "-v",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    took = time.monotonic() - started
    if proc.returncode not in (0, 1):  # 1: the claim does not fit (the pending one)
        say(f"[bench] explain {claim} exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
    else:
        say(f"[bench] explain {claim}: {explain_split(took, proc.stderr)}")
    return took


def _churn(
    cluster: Cluster, transport: KubeTransport, work: Workload, rng: random.Random
) -> tuple[int, int]:
    """Replace ``CHURN`` % of the kwok nodes, and delete ``CHURN`` % of the pods (of the
    other nodes) at ``RATE``."""
    pods, _ = _live(transport, work.namespace)
    nodes = sorted(n["metadata"]["name"] for n in list_kwok_nodes(transport))
    gone = rng.sample(nodes, int(len(nodes) * CHURN / 100))
    # The pods of a deleted node go with it (the pod GC, after its quarantine); deleting
    # them too would race it.
    staying = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") not in gone]
    doomed = rng.sample(staying, min(len(staying), int(len(pods) * CHURN / 100)))
    delete_kwok_nodes(transport, gone)
    for name in doomed:
        try:
            transport.request("DELETE", f"/api/v1/namespaces/{work.namespace}/pods/{name}")
        except KubeApiError as exc:
            if exc.status != 404:  # gone already: a ComputeDomain pod evicted with its peers
                raise
        time.sleep(1.0 / RATE)
    add_kwok_nodes(cluster, len(gone), gpus=GPUS, progress=say, timeout=max(300, NODES))
    return len(doomed), len(gone)


def run_phase(cluster: Cluster, name: str, *, with_components: bool, rng: random.Random) -> Phase:
    """One phase in its own namespace: create the workload, time explain, churn; return its
    figures (our components' usage and the metrics lag only ``with_components``)."""
    ns = f"scale-{name}"
    cluster.kubectl("create", "namespace", ns)
    transport = transport_of(cluster)
    gb200 = sum(
        1
        for n in list_kwok_nodes(transport)
        if n["metadata"]["labels"].get(FLEET_LABEL) == GB200.name
    )
    work = _workload(ns, gb200)
    watch = ClaimWatch(transport, ns, say)
    watch.start()
    scraper = None
    if with_components:
        url = scrape_url(transport)
        if url is not None:
            scraper = MetricsScraper(url, ns, SCRAPE_INTERVAL_S, say)
            scraper.start()
    time.sleep(1)  # the watches are open before the first object exists

    def own_texts() -> dict[str, str] | None:
        return webhook_texts(transport, say) if with_components else None

    # The webhook pods are read right after the API server, at each window's boundary.
    before, own_before = _metrics(cluster), own_texts()
    ours_start = component_usage(transport) if with_components else {}
    helpers = [scraper.pid] if scraper is not None else []
    cpu_start = cpu_reading(cluster, ours_start, helpers)
    controller_start = controller_text(scraper, say)
    memory = rss_reader(transport) if with_components else None
    if memory is not None:
        memory.start()
    started = time.monotonic()
    templates_s = _setup(cluster, transport, work, with_components)
    first_calls: dict[str, str] = {}
    own_first_calls: dict[str, dict[str, str] | None] = {}

    def on_count(n: int) -> None:
        if n >= FIRST_CALL_PODS and "text" not in first_calls:
            first_calls["text"] = _metrics(cluster)
            own_first_calls["text"] = own_texts()

    say(f"[bench] {name}: asking for {PODS} pods at {RATE:g}/s ({work.domains} ComputeDomains)")
    if memory is not None:
        memory.mark("creation")
    _ask_at_rate(transport, work, on_count)
    created = _wait(
        f"{name}: {PODS} pods scheduled, claims bound",
        lambda: _watched_whole(watch, work) and _whole(transport, work),
    )
    cpu_end = cpu_reading(cluster, component_usage(transport) if with_components else {}, helpers)
    controller_end = controller_text(scraper, say)
    after_creation, own_after_creation = _metrics(cluster), own_texts()
    last = max(watch.scheduled.values(), default=started)
    waits = {c: watch.claim_bound[c] - watch.claim_created[c] for c in watch.claim_bound}
    bound = list(waits.values())
    workloads = [*(k.name for k in TEMPLATES), DOMAIN_PREFIX.rstrip("-")]
    for claim in sorted(waits, key=waits.__getitem__, reverse=True)[:5]:
        seen = watch.claim_created[claim]
        allocated_at = watch.claim_allocated.get(claim, watch.claim_bound[claim])
        say(
            f"[bench] {name}: slow claim {claim}: seen {seen - started:.0f} s into the phase, "
            f"allocated after {allocated_at - seen:.1f} s, reserved after {waits[claim]:.1f} s"
        )
    say(
        f"[bench] {name}: {len(watch.scheduled)} pods scheduled, {len(bound)} claims bound "
        f"in {created - started:.0f} s"
    )
    mid = first_calls.get("text", after_creation)
    own_mid = own_first_calls.get("text", own_after_creation)
    creation = Creation(
        pods_per_s=len(watch.scheduled) / (last - started) if last > started else None,
        scheduled=len(watch.scheduled),
        claims=work.claims,
        domains=work.domains,
        bound_p50=percentile(bound, 0.5),
        bound_p99=percentile(bound, 0.99),
        webhook_first=_webhook(before, mid),
        webhook_steady=_webhook(mid, after_creation),
        requests=_requests(before, after_creation),
        seconds=created - started,
        templates_s=templates_s,
        own_first=_own_webhook(own_before, own_mid),
        own_steady=_own_webhook(own_mid, own_after_creation),
        cpu=split(cpu_start, cpu_end, created - started),
        slowest=slowest_by_workload(waits, 0.99, workloads),
        wait_bands=wait_bands(waits, watch.claim_created, started=started),
        reconciles=(
            reconcile_span(controller_start, controller_end)
            if controller_start is not None and controller_end is not None
            else None
        ),
    )
    # explain: one allocated claim of the workload, one that stays pending.
    if memory is not None:
        memory.mark("explain")
    _apply(cluster, [pending_claim(ns, GPUS)], ns)
    allocated = next(iter(watch.claim_bound))
    explain = (_explain(cluster, ns, "explain-pending"), _explain(cluster, ns, allocated))
    cluster.kubectl("delete", "resourceclaim", "-n", ns, "explain-pending")
    say(f"[bench] {name}: churn")
    if memory is not None:
        memory.mark("churn")
    churn_started = time.monotonic()
    deleted_pods, replaced_nodes = _churn(cluster, transport, work, rng)
    settled = _wait(f"{name}: workload whole after churn", lambda: _whole(transport, work))
    after, own_after = _metrics(cluster), own_texts()
    churn_bound = watch.bound_since(churn_started)
    churn = Churn(
        deleted_pods=deleted_pods,
        replaced_nodes=replaced_nodes,
        claims=len(churn_bound),
        bound_p50=percentile(churn_bound, 0.5),
        bound_p99=percentile(churn_bound, 0.99),
        webhook=_webhook(after_creation, after),
        requests=_requests(after_creation, after),
        seconds=settled - churn_started,
        own_webhook=_own_webhook(own_after_creation, own_after),
    )
    usage = None
    if with_components:
        if memory is not None:
            memory.stop()
        controller_last = controller_text(scraper, say)
        lists, restarts = (
            informer_counts(controller_start, controller_last)
            if controller_start is not None and controller_last is not None
            else ({}, {})
        )
        usage = Usage(
            start=measured(ours_start),
            end=measured(component_usage(transport)),
            seconds=settled - started,
            memory=memory.samples if memory is not None else (),
            lists=lists,
            watch_restarts=restarts,
        )
    watch.stop()
    lag = None
    if scraper is not None:
        scraper.stop()
        if usage is not None:
            per_scrape = scrape_cpu_s(transport, scraper.url)
            usage = replace(usage, scrape_cpu_s=per_scrape * scraper.scrapes)
            say(f"[bench] {name}: one scrape costs the allocation controller {per_scrape:.3f} s")
        lag = (lags(watch.claim_allocated, scraper.seen), scraper.scrapes, scraper.failures)
    cluster.kubectl("delete", "namespace", ns, "--wait=true", timeout=max(300, PODS // 5))
    transport.close()
    return Phase(
        name=name,
        creation=creation,
        churn=churn,
        explain=explain,
        usage=usage,
        metrics_lag=lag,
        requests=_requests(before, after),
        seconds=settled - started,
    )


def _print_without(without: Phase) -> None:
    rows = scheduler_rows(without)
    width = max(len(figure) for figure, _ in rows)
    print(
        f"scale, phase without our components only: {NODES} kwok nodes x {GPUS} GPUs, "
        f"{PODS} pods asked for at {RATE:g}/s, 1 real node, {os.cpu_count() or 0} CPUs"
    )
    print("\n".join(f"{figure:{width}} {value:>14}" for figure, value in rows))
    print("\n".join(["", *creation_cpu_lines(without, None)]))


def main() -> int:
    """Start the cluster with its kwok nodes, run the phases ``SCALE_PHASES`` names and
    print the report; tear the cluster down in every case."""
    if PHASES not in ("both", "with", "without"):
        say(f"[bench] SCALE_PHASES={PHASES!r}: expected 'both', 'with' or 'without'")
        return 2
    state_dir = Path(tempfile.mkdtemp(prefix="dra-e2e-scale-"))
    cluster = Cluster(state_dir)
    rng = random.Random(27)
    # explain is timed as installed, with its bytecode (not compiling the workspace each run).
    write_bytecode("kubectl_dra.cli")
    say(f"[bench] cluster in {state_dir}: 1 real node, {NODES} kwok nodes")
    cluster.up(progress=say, nodes=1)
    try:
        add_kwok_nodes(cluster, NODES, gpus=GPUS, progress=say, timeout=max(300, NODES))
        without = None
        if PHASES in ("both", "without"):
            # The chart's DeviceClasses the workload uses, for the phase without the chart.
            classes = [*device_classes(), channel_device_class()]
            _apply(cluster, classes)
            without = run_phase(cluster, "without", with_components=False, rng=rng)
            # Kept in the log should the second phase fail: a phase at 1,000 nodes takes 20 min.
            say(f"[bench] without: {without!r}")
            if PHASES == "without":
                _print_without(without)
                return 0
            for device_class in classes:
                cluster.kubectl("delete", "deviceclass", device_class["metadata"]["name"])
        _apply(cluster, [components_flow_schema(chart.NAMESPACE)])
        driver_install.install_driver(cluster, sets=COMPONENTS, progress=say)
        with_ = run_phase(cluster, "with", with_components=True, rng=rng)
        print(
            render(
                without,
                with_,
                nodes=NODES,
                gpus=GPUS,
                pods=PODS,
                rate=RATE,
                cpus=os.cpu_count() or 0,
            )
        )
        print(f"(metrics lag: over-stated by up to one scrape interval, {SCRAPE_INTERVAL_S:g} s)")
    finally:
        cluster.down(progress=say)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
