"""Benchmark: what one scrape of the allocation controller's ``/metrics`` costs it, in-process.

Run: ``make bench BENCH=metrics_scrape`` (or ``uv run python
packages/controller/bench/bench_metrics_scrape.py [--quick]``)

The 1,000-node run (docs/scale.md) found one scrape costing the controller 0.109 CPU s at
~6,200 per-claim series, on a saturated 2-vCPU VM. This measures the same rendering here,
with no cluster:

* **render**: the seed's state of that run (``--claims`` series, half allocated and half
  pending, and the free devices of ``--nodes`` nodes of 8 GPUs, MIG nodes with 3 profiles
  every third), CPU time of one rendering of the whole exposition: the baseline, the same
  number of series in a plain prometheus_client ``Gauge`` through ``generate_latest``;
  before, ``generate_latest(metrics.registry)`` (what ``/metrics`` served until now); after,
  ``metrics.exposition()`` (what it serves now) on the first scrape after a publish (lines
  of the earlier state kept, one claim changed), and on every further scrape until the next
  publish; and ``publish()`` itself.
* **http**: wall time of one ``GET /metrics`` over localhost, both ways.
* **reconcile**: one claim change at 5,000 claims and 1,000 nodes of 8 GPUs (informers over
  a fake API server, as ``bench_allocation_controller.py``), the reconcile's steps apart,
  then its wall time while another thread scrapes back to back (the GIL shared with the
  scrapes, the worst case of a saturated CPU), before and after.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable

# The fixtures of the change-to-metrics benchmark (same directory: on sys.path when run).
from bench_allocation_controller import FakeApi, _claim, _objects
from dra_allocator.features import Features
from dra_controller.allocation_controller import (
    AllocationController,
    AvailableSeries,
    ClaimSeries,
    ControllerMetrics,
)
from dra_controller.allocation_controller.availability import free_devices
from dra_controller.allocation_controller.claim_series import claim_series
from dra_controller.allocation_controller.diagnosis import make_cluster
from dra_controller.allocation_controller.metrics import ClusterSeries
from dra_controller.metrics_http import serve
from dra_kube_client.informers import Informer
from dra_kube_client.informers.resources import ALL_RESOURCES
from prometheus_client import CollectorRegistry, Gauge, generate_latest

GPUS = 8
PRODUCTS = ("NVIDIA GB200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB")
MIG_PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb")


def seed_state(claims: int, nodes: int, changed: int = -1) -> ClusterSeries:
    """The seed series of ``claims`` claims and ``nodes`` nodes (claim ``changed`` flipped)."""
    allocated: list[ClaimSeries] = []
    pending: list[ClaimSeries] = []
    for i in range(claims):
        s = ClaimSeries(f"scale-{i % 41}", f"pod-{i}-gpu-abcde", "gpu.nvidia.com")
        is_allocated = (i % 2 == 0) != (i == changed)
        (allocated if is_allocated else pending).append(s)
    available: dict[AvailableSeries, int] = {}
    for n in range(nodes):
        node = f"kwok-node-{n:04d}"
        if n % 3 == 2:
            for profile in MIG_PROFILES:
                available[AvailableSeries(node, "mig.nvidia.com", profile)] = n % 7
        available[AvailableSeries(node, "gpu.nvidia.com", PRODUCTS[n % 3])] = n % (GPUS + 1)
    return ClusterSeries(allocated=allocated, pending=pending, available=available)


def plain_gauge(state: ClusterSeries) -> CollectorRegistry:
    """The same number of series in one plain prometheus_client Gauge."""
    registry = CollectorRegistry()
    gauge = Gauge(
        "plain_series", "baseline", ["namespace", "name", "resource_class"], registry=registry
    )
    for s in (*state.allocated, *state.pending):
        gauge.labels(s.namespace, s.name, s.resource_class).set(1)
    for a, count in state.available.items():
        gauge.labels(a.node, a.resource_class, a.attribute).set(count)
    return registry


def cpu(fn: Callable[[], object], reps: int) -> float:
    """Median CPU seconds of ``fn`` over ``reps`` calls."""
    times = []
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def first_after_publish(metrics: ControllerMetrics, states: list[ClusterSeries]) -> float:
    """Median CPU seconds of the first ``exposition()`` after publishing each state."""
    times = []
    for state in states:
        metrics.publish(state)
        t0 = time.process_time()
        metrics.exposition()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def http_get(port: int, reps: int) -> float:
    """Median wall seconds of ``GET /metrics``."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as resp:
            resp.read()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def render_part(claims: int, nodes: int, reps: int) -> None:
    """Scrape rendering and publish, before and after, against a plain Gauge."""
    states = [seed_state(claims, nodes, changed=c) for c in range(reps + 1)]
    metrics = ControllerMetrics()
    metrics.publish(states[0])
    series = len(states[0].allocated) + len(states[0].pending) + len(states[0].available)
    assert metrics.exposition() == generate_latest(metrics.registry)
    print(f"render: {series:,} seed series ({claims:,} claims, {nodes:,} nodes), CPU per call")
    plain = plain_gauge(states[0])
    base = cpu(lambda: generate_latest(plain), reps)
    before = cpu(lambda: generate_latest(metrics.registry), reps)
    first = first_after_publish(metrics, states[1:])
    cached = cpu(metrics.exposition, reps)
    publish = cpu(lambda: metrics.publish(states[0]), reps)
    cold = first_after_publish(ControllerMetrics(), states[:1])
    rows = [
        ("baseline: plain Gauge, generate_latest", base),
        ("before: generate_latest(registry)", before),
        ("after: first scrape after publish", first),
        ("after: first scrape, no lines kept", cold),
        ("after: further scrapes", cached),
        ("publish()", publish),
    ]
    for label, seconds in rows:
        print(f"  {label:40s} {seconds * 1000:8.2f} ms   {seconds / base:6.3f}x baseline")
    print(
        f"  before/after: {before / first:.0f}x on the first scrape after a publish, "
        f"{before / cached:.0f}x on the others"
    )
    old = serve(("127.0.0.1", 0), registry=metrics.registry, ready=lambda: True)
    new = serve(("127.0.0.1", 0), registry=metrics.exposition, ready=lambda: True)
    try:
        before_http = http_get(old.server_address[1], reps)
        after_http = http_get(new.server_address[1], reps)
    finally:
        for server in (old, new):
            server.shutdown()
            server.server_close()
    print(
        f"http GET /metrics (wall): before {before_http * 1000:.1f} ms, "
        f"after {after_http * 1000:.1f} ms ({before_http / after_http:.1f}x)"
    )


def _steps(ctl: AllocationController) -> dict[str, float]:
    """Wall seconds of the reconcile's steps, one after another, on the controller's caches."""
    out = {}
    t0 = time.perf_counter()
    snap = ctl.view.snapshot()
    t1 = time.perf_counter()
    cluster = make_cluster(snap, engine=ctl.engine, features=Features())
    t2 = time.perf_counter()
    claim_series(snap.claims, ctl._series_cache)
    t3 = time.perf_counter()
    free_devices(cluster, ctl._availability_cache)
    t4 = time.perf_counter()
    out["view.snapshot"], out["make_cluster"] = t1 - t0, t2 - t1
    out["claim_series"], out["free_devices"] = t3 - t2, t4 - t3
    return out


def reconcile_part(claims: int, nodes: int, changes: int) -> None:
    """One claim change at this size: the reconcile's steps, and its time beside scrapes."""
    objects = _objects(nodes, GPUS, claims)
    claim_list = list(objects["ResourceClaim"])
    api = FakeApi(objects)
    informers = {r.kind: Informer(api, r) for r in ALL_RESOURCES}
    for informer in informers.values():
        informer.list_once()
    metrics = ControllerMetrics()
    ctl = AllocationController({k: i.store for k, i in informers.items()}, metrics=metrics)
    ctl.reconcile()
    metrics.exposition()
    step = 0

    def change() -> None:
        nonlocal step
        step += 1
        i = (step * 7919) % claims
        api.change(claim_list, _claim(i, nodes, GPUS, allocated=step % 2 == 1, rv=10 + step))
        informers["ResourceClaim"].watch_once("1")

    steps: dict[str, list[float]] = {}
    for _ in range(changes):
        change()
        t0 = time.perf_counter()
        ctl.reconcile()
        t1 = time.perf_counter()
        metrics.exposition()
        out = {"whole reconcile": t1 - t0, "first scrape after it": time.perf_counter() - t1}
        change()  # the steps apart, on a change of their own
        out.update(_steps(ctl))
        ctl.reconcile()
        for label, seconds in out.items():
            steps.setdefault(label, []).append(seconds)
    print(f"reconcile after one claim change: {claims:,} claims, {nodes:,} nodes x {GPUS} GPUs")
    for label, values in steps.items():
        print(f"  {label:28s} p50 {statistics.median(values) * 1000:8.1f} ms")

    def beside_scrapes(render: Callable[[], bytes]) -> float:
        stop = threading.Event()

        def scrape() -> None:
            while not stop.is_set():
                render()

        thread = threading.Thread(target=scrape, daemon=True)
        thread.start()
        times = []
        try:
            for _ in range(changes):
                change()
                t0 = time.perf_counter()
                ctl.reconcile()
                times.append(time.perf_counter() - t0)
        finally:
            stop.set()
            thread.join()
        return statistics.median(times)

    alone = statistics.median(steps["whole reconcile"])
    before = beside_scrapes(lambda: generate_latest(metrics.registry))
    after = beside_scrapes(metrics.exposition)
    print(
        f"  reconcile beside back-to-back scrapes: before {before * 1000:.1f} ms "
        f"({before / alone:.1f}x alone), after {after * 1000:.1f} ms ({after / alone:.1f}x alone)"
    )


def main() -> int:
    """Run both parts."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a tenth of the size, fewer reps")
    parser.add_argument("--claims", type=int, default=6200)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--reconcile-claims", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    if args.quick:
        args.claims, args.nodes, args.reconcile_claims, args.reps = 620, 100, 500, 5
    render_part(args.claims, args.nodes, args.reps)
    reconcile_part(args.reconcile_claims, args.nodes, args.reps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
