"""Scale: simulated GPU nodes (kwok) on the harness's real control plane, with and without our
control-plane components (allocation controller, webhook, ComputeDomain controller).

On demand only (``make bench BENCH=scale``; the unfiltered ``make bench`` leaves it out): it
needs root and starts a cluster. Sizes come from the environment: ``SCALE_NODES`` (1000),
``SCALE_PODS`` (5000), ``SCALE_GPUS`` (GPUs per node, 8), ``SCALE_TIMEOUT_S`` (per phase,
1800). One run does both phases on one cluster, without the chart first, then with it:

- pods/s scheduled: pods scheduled / (last scheduled - workload applied);
- claim-to-bound p50/p99: from a claim's creation to its allocation reserved for its pod,
  as seen by a watch on ResourceClaims;
- webhook admission p50/p99: the API server's own histogram, difference over the phase;
- API requests per FlowSchema: the API server labels no metric with the user agent, so our
  components' service accounts get a FlowSchema of their own (same priority level).

Each figure is printed next to the target of issue #27.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dra_e2e import chart, driver_install
from dra_e2e.cluster import Cluster
from dra_e2e.kwok_cluster import add_kwok_nodes, transport_of
from dra_e2e.scale_metrics import (
    COMPONENTS_FLOW_SCHEMA,
    DISPATCHED,
    WEBHOOK_HISTOGRAM,
    components_flow_schema,
    delta,
    format_figure,
    histogram_quantile,
    parse_samples,
    percentile,
    ratio_ok,
    sum_by,
    top,
)
from dra_e2e.scale_workload import device_classes, workload
from dra_kube_client import KubeTransport


def _env(name: str, default: int) -> int:
    return int(os.environ.get(name, str(default)))


NODES = _env("SCALE_NODES", 1000)
PODS = _env("SCALE_PODS", 5000)
GPUS = _env("SCALE_GPUS", 8)
TIMEOUT_S = _env("SCALE_TIMEOUT_S", 1800)
#: The chart with every control-plane component on: the allocation controller (on by
#: default), the webhook (its TLS from a chart-made Secret; it judges time-slicing configs by
#: the plugin's gate, so the gate is on) and the ComputeDomain controller.
COMPONENTS = {
    "webhook.enabled": "true",
    "webhook.tls.mode": "secret",
    "featureGates.TimeSlicingSettings": "true",
    "resources.computeDomains.enabled": "true",
}


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Watch:
    """Client-side times of pods getting a node and claims getting reserved, in a namespace."""

    transport: KubeTransport
    namespace: str
    scheduled: dict[str, float] = field(default_factory=dict)
    claim_created: dict[str, float] = field(default_factory=dict)
    claim_bound: dict[str, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def _follow(self, plural: str, path: str, on: Any) -> None:
        while not self.stop.is_set():
            try:
                for event in self.transport.watch_lines(path, query={}, timeout_s=60):
                    on(event.get("object") or {}, time.monotonic())
                    if self.stop.is_set():
                        return
            except Exception as exc:  # a broken watch is reopened; the report counts what it saw
                say(f"[bench] {plural} watch reopened after: {exc}")

    def _pod(self, obj: dict[str, Any], now: float) -> None:
        name = obj.get("metadata", {}).get("name", "")
        if (obj.get("spec") or {}).get("nodeName") and name not in self.scheduled:
            self.scheduled[name] = now

    def _claim(self, obj: dict[str, Any], now: float) -> None:
        name = obj.get("metadata", {}).get("name", "")
        self.claim_created.setdefault(name, now)
        status = obj.get("status") or {}
        if status.get("allocation") and status.get("reservedFor") and name not in self.claim_bound:
            self.claim_bound[name] = now

    def start(self) -> None:
        ns = self.namespace
        for plural, path, on in (
            ("pods", f"/api/v1/namespaces/{ns}/pods", self._pod),
            ("claims", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", self._claim),
        ):
            threading.Thread(target=self._follow, args=(plural, path, on), daemon=True).start()


@dataclass
class Phase:
    """One phase's figures."""

    name: str
    pods_per_s: float | None
    bound_p50: float | None
    bound_p99: float | None
    webhook_p50: float | None
    webhook_p99: float | None
    requests: dict[str, float]
    scheduled: int


def _metrics(cluster: Cluster) -> str:
    return cluster.kubectl("get", "--raw", "/metrics", timeout=60)


def _apply(cluster: Cluster, objects: list[dict[str, Any]], namespace: str | None = None) -> None:
    args = ["apply", "-f", "-"] + (["-n", namespace] if namespace else [])
    cluster.kubectl(*args, input_text="\n".join(json.dumps(o) for o in objects), timeout=120)


def run_phase(cluster: Cluster, name: str) -> Phase:
    ns = f"scale-{name}"
    cluster.kubectl("create", "namespace", ns)
    transport = transport_of(cluster)
    watch = Watch(transport, ns)
    watch.start()
    time.sleep(1)  # the watches are open before the first object exists
    before = _metrics(cluster)
    started = time.monotonic()
    _apply(cluster, workload(ns, PODS), ns)
    say(f"[bench] {name}: {PODS} pods applied on {NODES} kwok nodes")
    deadline = started + TIMEOUT_S
    while len(watch.scheduled) < PODS and time.monotonic() < deadline:
        time.sleep(1)
    # Claims are reserved for their pods while they are scheduled; wait for the last ones.
    while len(watch.claim_bound) < PODS and time.monotonic() < deadline:
        time.sleep(1)
    after = _metrics(cluster)
    watch.stop.set()
    last = max(watch.scheduled.values(), default=started)
    bound = [watch.claim_bound[c] - watch.claim_created[c] for c in watch.claim_bound]
    hist = delta(
        parse_samples(before, f"{WEBHOOK_HISTOGRAM}_bucket"),
        parse_samples(after, f"{WEBHOOK_HISTOGRAM}_bucket"),
    )
    requests = sum_by(
        delta(parse_samples(before, DISPATCHED), parse_samples(after, DISPATCHED)), "flow_schema"
    )
    say(f"[bench] {name}: {len(watch.scheduled)} pods scheduled, {len(bound)} claims bound")
    cluster.kubectl("delete", "namespace", ns, "--wait=true", timeout=max(120, PODS // 10))
    transport.close()
    return Phase(
        name=name,
        pods_per_s=len(watch.scheduled) / (last - started) if last > started else None,
        bound_p50=percentile(bound, 0.5),
        bound_p99=percentile(bound, 0.99),
        webhook_p50=histogram_quantile(0.5, hist),
        webhook_p99=histogram_quantile(0.99, hist),
        requests=requests,
        scheduled=len(watch.scheduled),
    )


def _ms(value: float | None) -> float | None:
    return None if value is None else value * 1000.0


def _row(label: str, without: str, with_: str, target: str) -> None:
    print(f"{label:28} {without:>12} {with_:>12}  {target}")


def report(without: Phase, with_: Phase) -> None:
    """The figures side by side, each with the issue's target."""
    cpus = os.cpu_count()
    print(f"\nscale: {NODES} kwok nodes x {GPUS} GPUs, {PODS} pods, 1 real node, {cpus} CPUs")
    _row("figure", "without", "with", "target (issue #27)")
    _row("pods scheduled", str(without.scheduled), str(with_.scheduled), f"all {PODS}")
    pods_ok = ratio_ok(without.pods_per_s, with_.pods_per_s, most=1 / 0.95)
    _row(
        "pods/s scheduled",
        format_figure(without.pods_per_s, ""),
        format_figure(with_.pods_per_s, ""),
        f"with >= 95% of without: {pods_ok}",
    )
    _row(
        "claim-to-bound p50",
        format_figure(_ms(without.bound_p50), "ms", 0),
        format_figure(_ms(with_.bound_p50), "ms", 0),
        "(reported)",
    )
    p99_ok = ratio_ok(with_.bound_p99, without.bound_p99, most=1.10)
    _row(
        "claim-to-bound p99",
        format_figure(_ms(without.bound_p99), "ms", 0),
        format_figure(_ms(with_.bound_p99), "ms", 0),
        f"with <= 110% of without: {p99_ok}",
    )
    _row("webhook admission p50", "-", format_figure(_ms(with_.webhook_p50), "ms"), "(reported)")
    p99 = _ms(with_.webhook_p99)
    verdict = "n/a" if p99 is None else ("ok" if p99 <= 20 else "MISSED")
    _row("webhook admission p99", "-", format_figure(p99, "ms"), f"<= 20 ms: {verdict}")
    print("\nAPI requests dispatched by FlowSchema (the API server has no user-agent label):")
    for phase in (without, with_):
        print(f"  {phase.name}: " + ", ".join(f"{k}={v:.0f}" for k, v in top(phase.requests)))
    ours = with_.requests.get(COMPONENTS_FLOW_SCHEMA, 0.0)
    print(f"  our components ({COMPONENTS_FLOW_SCHEMA}): {ours:.0f} requests in the phase")


def main() -> int:
    state_dir = Path(tempfile.mkdtemp(prefix="dra-e2e-scale-"))
    cluster = Cluster(state_dir)
    say(f"[bench] cluster in {state_dir}: 1 real node, {NODES} kwok nodes")
    cluster.up(progress=say, nodes=1)
    try:
        add_kwok_nodes(cluster, NODES, gpus=GPUS, progress=say, timeout=max(300, NODES))
        _apply(cluster, device_classes())
        without = run_phase(cluster, "without")
        for device_class in device_classes():
            cluster.kubectl("delete", "deviceclass", device_class["metadata"]["name"])
        _apply(cluster, [components_flow_schema(chart.NAMESPACE)])
        driver_install.install_driver(cluster, sets=COMPONENTS, progress=say)
        with_ = run_phase(cluster, "with")
        report(without, with_)
    finally:
        cluster.down(progress=say)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
