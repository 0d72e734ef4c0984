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
  a fake API server, as ``bench_allocation_controller.py``): the whole reconcile, the first
  scrape after it, and the reconcile's steps apart.
* **lag**: claim allocated -> the first scrape showing it, as the scale benchmark measures
  it less the API server and the watch (:func:`lag_part`), before and after, with the
  reconciles' mean time and the garbage collector's full collections.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

# The fixtures of the change-to-metrics benchmark (same directory: on sys.path when run).
from bench_allocation_controller import FakeApi, _claim, _objects
from dra_allocator.features import Features
from dra_controller.allocation_controller import (
    AllocationController,
    AvailableSeries,
    ClaimSeries,
    ControllerMetrics,
    Settings,
)
from dra_controller.allocation_controller.availability import free_devices
from dra_controller.allocation_controller.caches import CONTROLLER_RESOURCES
from dra_controller.allocation_controller.claim_series import claim_series
from dra_controller.allocation_controller.diagnosis import make_cluster
from dra_controller.allocation_controller.metrics import PREFIX, ClusterSeries
from dra_controller.metrics_http import serve
from dra_kube_client.informers import Informer
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


class World:
    """Informers over a fake API server, and a controller reading them (reconciled once)."""

    def __init__(self, claims: int, nodes: int, settings: Settings | None = None) -> None:
        """``claims`` claims (even ones allocated), ``nodes`` nodes of ``GPUS`` GPUs."""
        self.claims, self.nodes = claims, nodes
        objects = _objects(nodes, GPUS, claims)
        self.claim_list = list(objects["ResourceClaim"])
        self.api = FakeApi(objects)
        self.informers = {r.kind: Informer(self.api, r) for r in CONTROLLER_RESOURCES}
        for informer in self.informers.values():
            informer.list_once()
        self.metrics = ControllerMetrics()
        stores = {k: i.store for k, i in self.informers.items()}
        self.ctl = AllocationController(stores, metrics=self.metrics, settings=settings)
        self.ctl.reconcile()
        self.metrics.exposition()
        self.lock = threading.Lock()

    def change(self, i: int, *, allocated: bool, rv: int) -> None:
        """Claim ``i`` allocated or released, through a watch event (marks the controller dirty)."""
        obj = _claim(i, self.nodes, GPUS, allocated=allocated, rv=rv)
        with self.lock:
            self.api.change(self.claim_list, obj)
            self.informers["ResourceClaim"].watch_once("1")


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
    world = World(claims, nodes)
    ctl, metrics = world.ctl, world.metrics
    step = 0

    def change() -> None:
        nonlocal step
        step += 1
        i = (step * 7919) % claims
        world.change(i, allocated=step % 2 == 1, rv=10 + step)

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


class GcPauses:
    """Wall time of the collector's full (generation 2) collections, while installed."""

    def __init__(self) -> None:
        """Not yet installed."""
        self.pauses: list[float] = []
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._callback)

    def summary(self) -> str:
        """Count, median and longest pause."""
        if not self.pauses:
            return "no full collection"
        return (
            f"{len(self.pauses)} full collections, p50 {statistics.median(self.pauses) * 1000:.0f} "
            f"ms, max {max(self.pauses) * 1000:.0f} ms"
        )


def reconciles(metrics: ControllerMetrics) -> tuple[float, float]:
    """(count, total seconds) of the reconciles so far, from the controller's histogram."""
    values = {
        s.name: s.value
        for family in metrics.reconcile_seconds.collect()
        for s in family.samples
        if s.name.endswith(("_count", "_sum"))
    }
    return (
        values[f"{PREFIX}_reconcile_duration_seconds_count"],
        values[f"{PREFIX}_reconcile_duration_seconds_sum"],
    )


class Scraper:
    """GETs ``/metrics`` every 0.5 s and notes when each awaited series first shows."""

    def __init__(self, url: str) -> None:
        """Start scraping ``url``."""
        self.url = url
        self.waiting: dict[bytes, float] = {}
        self.lags: list[float] = []
        self.scrapes = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            started = time.perf_counter()
            with urllib.request.urlopen(self.url) as resp:
                body = resp.read()
            seen = time.perf_counter()
            self.scrapes += 1
            for needle, at in list(self.waiting.items()):
                if needle in body:
                    self.lags.append(seen - at)
                    del self.waiting[needle]
            self.done.wait(max(0.0, 0.5 - (time.perf_counter() - started)))

    def stop(self) -> None:
        """Once nothing is awaited: stop (``lags`` sorted)."""
        while self.waiting:
            time.sleep(0.1)
        self.done.set()
        self.thread.join()
        self.lags.sort()


def lag_part(claims: int, nodes: int, changes: int, rate: float) -> None:
    """Claim allocated -> first scrape (every 0.5 s) showing it, with the reconcile loop running.

    As the scale benchmark measures it, less the API server and the watch: ``rate`` pending
    claims a second are allocated through the informer while the controller's own loop
    (``run``: debounce, reconcile, publish, heap policy) runs and a client scrapes
    ``/metrics`` every 0.5 s. Three phases, each on a fresh controller: before
    (``generate_latest`` per scrape, the collector as Python has it), the scrape change alone
    (``exposition``), and both changes (``exposition`` and ``heap.HeapPolicy``).
    """
    print(
        f"metrics lag, claim allocated -> first scrape showing it: {claims:,} claims, "
        f"{nodes:,} nodes, {rate:g} allocations/s, scrapes every 0.5 s, {changes} claims per phase"
    )
    for label, cached, full_gc_every_s in (
        ("before: generate_latest, gc as is", False, None),
        ("after: exposition(), gc as is", True, None),
        ("after: exposition(), heap frozen", True, 600.0),
    ):
        world = World(claims, nodes, Settings(full_gc_every_s=full_gc_every_s))
        metrics = world.metrics
        stop = threading.Event()
        loop = threading.Thread(target=world.ctl.run, args=(stop,), daemon=True)
        loop.start()
        assert world.ctl.reconciled.wait(60)
        registry = metrics.exposition if cached else metrics.registry
        server = serve(("127.0.0.1", 0), registry=registry, ready=lambda: True)
        scraper = Scraper(f"http://127.0.0.1:{server.server_address[1]}/metrics")
        count0, sum0 = reconciles(metrics)
        try:
            with GcPauses() as gc_pauses:
                scrapes = lag_phase(world, scraper, iter(range(1, claims, 2)), changes, rate)
        finally:
            stop.set()
            world.ctl.dirty.set()
            loop.join()
            server.shutdown()
            server.server_close()
        count, total = reconciles(metrics)
        lags = scraper.lags
        p99 = lags[round(0.99 * (len(lags) - 1))]
        print(
            f"  {label:34s} p50 {statistics.median(lags):5.2f} s   p99 {p99:5.2f} s   "
            f"max {lags[-1]:5.2f} s"
        )
        mean_ms = (total - sum0) / (count - count0) * 1000
        print(
            f"    {count - count0:.0f} reconciles, mean {mean_ms:.0f} ms; {scrapes} scrapes; "
            f"{gc_pauses.summary()}"
        )


def lag_phase(
    world: World, scraper: Scraper, pending: Iterator[int], changes: int, rate: float
) -> int:
    """Allocate ``changes`` pending claims at ``rate`` a second; the scrapes it took."""
    for _ in range(changes):
        i = next(pending)
        world.change(i, allocated=True, rv=100 + i)
        needle = f'kube_resourceclaim_allocated{{name="claim-{i}",'.encode()
        scraper.waiting[needle] = time.perf_counter()
        time.sleep(1 / rate)
    scraper.stop()
    return scraper.scrapes


def main() -> int:
    """Run both parts."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a tenth of the size, fewer reps")
    parser.add_argument("--claims", type=int, default=6200)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--reconcile-claims", type=int, default=5000)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--lag-changes", type=int, default=80)
    parser.add_argument("--rate", type=float, default=8.0, help="claims allocated per second")
    args = parser.parse_args()
    if args.quick:
        args.claims, args.nodes, args.reconcile_claims, args.reps = 620, 100, 500, 5
        args.lag_changes = 16
    render_part(args.claims, args.nodes, args.reps)
    reconcile_part(args.reconcile_claims, args.nodes, args.reps)
    lag_part(args.reconcile_claims, args.nodes, args.lag_changes, args.rate)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
