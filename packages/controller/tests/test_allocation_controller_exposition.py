"""What the allocation controller's ``/metrics`` serves: the seed's families rendered once
per publish (``ControllerMetrics.exposition``), the same text prometheus_client renders."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Iterable
from typing import Any

from controller_objects import GPU_CLASS, MIG_CLASS, claim, gpu, mig, node, pod, slice_, stores
from dra_controller.allocation_controller import (
    AllocationController,
    AvailableSeries,
    ClaimSeries,
    ControllerMetrics,
)
from dra_controller.allocation_controller.metrics import ClusterSeries
from dra_controller.metrics_http import serve
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

MEM_40 = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
SEED = (
    "kube_resourceclaim_allocated",
    "kube_resourceclaim_pending",
    "kube_resourceclaim_unsatisfiable",
    "node_dra_resource_available",
)
Parsed = dict[str, tuple[str, str, frozenset[tuple[str, frozenset[tuple[str, str]], float]]]]


def parse(text: bytes) -> Parsed:
    """Each family's type, HELP and samples (name, labels, value)."""
    return {
        f.name: (
            f.type,
            f.documentation,
            frozenset((s.name, frozenset(s.labels.items()), s.value) for s in f.samples),
        )
        for f in text_string_to_metric_families(text.decode())
    }


def seed_only(parsed: Parsed) -> Parsed:
    """The seed's four families."""
    return {name: parsed[name] for name in SEED}


class _Today(Collector):
    """The seed's families as the controller rendered them before seed_text (its old code)."""

    def __init__(self, series: ClusterSeries) -> None:
        self.series = series

    def collect(self) -> Iterable[GaugeMetricFamily]:
        series = self.series
        families = []
        for name, help_text, claims in (
            (
                "kube_resourceclaim_allocated",
                "1 for each allocated ResourceClaim, by the DeviceClass of its requests",
                series.allocated,
            ),
            (
                "kube_resourceclaim_pending",
                "1 for each ResourceClaim waiting for allocation, by the DeviceClass of its "
                "requests",
                series.pending,
            ),
            (
                "kube_resourceclaim_unsatisfiable",
                "1 for each pending ResourceClaim that an unschedulable pod waits for and that "
                "no node can satisfy, by the DeviceClass of its requests",
                series.unsatisfiable,
            ),
        ):
            family = GaugeMetricFamily(
                name, help_text, labels=["namespace", "name", "resource_class"]
            )
            for s in claims:
                family.add_metric([s.namespace, s.name, s.resource_class], 1)
            families.append(family)
        available = GaugeMetricFamily(
            "node_dra_resource_available",
            "Free devices per node matching each DeviceClass, by product name or MIG profile",
            labels=["node", "resource_class", "attribute"],
        )
        for key, count in sorted(
            series.available.items(),
            key=lambda kv: (kv[0].node, kv[0].resource_class, kv[0].attribute),
        ):
            available.add_metric([key.node, key.resource_class, key.attribute], count)
        families.append(available)
        return families


def today(series: ClusterSeries) -> bytes:
    """The seed's families of ``series`` as the old code rendered them."""
    registry = CollectorRegistry()
    registry.register(_Today(series))
    return generate_latest(registry)


def _objects() -> list[dict[str, Any]]:
    return [
        GPU_CLASS,
        MIG_CLASS,
        node("n1"),
        node("n2"),
        node("n3"),
        slice_("n1", [gpu("gpu-0", "8Gi"), gpu("gpu-1", "8Gi")]),
        slice_("n2", [gpu("gpu-0", "12Gi", product='Odd "GPU" \\ name')]),
        slice_("n3", [mig("mig-0", "1g.5gb"), mig("mig-1", "2g.10gb")]),
        claim("held", allocated_on=("n1", "gpu-0")),
        claim("big", selector=MEM_40),
        pod("trainer", "big"),
        claim("small", ns="other"),
    ]


def _state(tag: str) -> ClusterSeries:
    """A state whose every family names ``tag``, with label values that need escaping."""
    return ClusterSeries(
        allocated=[ClaimSeries("team", f"a-{tag}", "gpu.nvidia.com"), ClaimSeries("t", "x", "")],
        pending=[ClaimSeries("team", f"p-{tag}", 'odd"class\\\nname')],
        unsatisfiable=[ClaimSeries("team", f"p-{tag}", 'odd"class\\\nname')],
        available={
            AvailableSeries(f"node-{tag}", "gpu.nvidia.com", "NVIDIA A100"): 3,
            AvailableSeries("node-0", "mig.nvidia.com", "1g.5gb"): 0,
            AvailableSeries("node-0", "gpu.nvidia.com", "unknown"): 1_000_000,
        },
    )


def test_exposition_is_what_prometheus_client_renders_for_a_reconciled_state() -> None:
    metrics = ControllerMetrics()
    ctl = AllocationController(stores(_objects()), metrics=metrics)
    series, _ = ctl.reconcile()
    assert [len(series.allocated), len(series.unsatisfiable)] == [1, 1]
    assert len(series.pending) == 2
    assert len(series.available) == 4
    metrics.events.labels("DRAUnsatisfiable", "posted").inc()
    served = metrics.exposition()
    assert parse(served) == parse(generate_latest(metrics.registry))
    assert served == generate_latest(metrics.registry)
    assert served.startswith(today(series))
    # The seed article's names and HELP texts, as the dashboards and alert rules know them.
    assert {n: f[:2] for n, f in seed_only(parse(served)).items()} == {
        "kube_resourceclaim_allocated": (
            "gauge",
            "1 for each allocated ResourceClaim, by the DeviceClass of its requests",
        ),
        "kube_resourceclaim_pending": (
            "gauge",
            "1 for each ResourceClaim waiting for allocation, by the DeviceClass of its requests",
        ),
        "kube_resourceclaim_unsatisfiable": (
            "gauge",
            "1 for each pending ResourceClaim that an unschedulable pod waits for and that no "
            "node can satisfy, by the DeviceClass of its requests",
        ),
        "node_dra_resource_available": (
            "gauge",
            "Free devices per node matching each DeviceClass, by product name or MIG profile",
        ),
    }


def test_exposition_escapes_label_values_and_formats_values_as_prometheus_client() -> None:
    metrics = ControllerMetrics()
    for tag in ("a", "b", "a"):
        state = _state(tag)
        metrics.publish(state)
        served = metrics.exposition()
        assert served == generate_latest(metrics.registry)
        assert served.startswith(today(state))
        pending = seed_only(parse(served))["kube_resourceclaim_pending"][2]
        labels = {dict(s[1])["resource_class"] for s in pending}
        assert labels == {'odd"class\\\nname'}


def test_a_change_after_publish_shows_on_the_next_scrape() -> None:
    metrics = ControllerMetrics()
    metrics.publish(_state("a"))
    first = parse(metrics.exposition())
    metrics.events.labels("DRAUnsatisfiable", "posted").inc()
    metrics.leader.set(1)
    live = parse(metrics.exposition())
    assert seed_only(live) == seed_only(first)
    events = live["dra_allocation_controller_events"][2]
    assert ("dra_allocation_controller_events_total", 1.0) in {(s[0], s[2]) for s in events}
    assert (
        live["dra_allocation_controller_leader"][2] != first["dra_allocation_controller_leader"][2]
    )
    # The claim moves from pending to allocated: its line leaves one family for the other.
    moved = _state("a")
    moved.allocated.append(moved.pending.pop())
    moved.unsatisfiable.clear()
    metrics.publish(moved)
    after = metrics.exposition()
    assert after == generate_latest(metrics.registry)
    names = {
        f: {dict(s[1])["name"] for s in v[2]}
        for f, v in seed_only(parse(after)).items()
        if f != "node_dra_resource_available"
    }
    assert names["kube_resourceclaim_allocated"] == {"a-a", "x", "p-a"}
    assert names["kube_resourceclaim_pending"] == names["kube_resourceclaim_unsatisfiable"] == set()


def test_scrapes_during_publishes_see_one_whole_state() -> None:
    metrics = ControllerMetrics()
    states = [_state("a"), _state("b")]
    metrics.publish(states[0])
    expected = []
    for state in states:
        metrics.publish(state)
        expected.append(seed_only(parse(metrics.exposition())))
    assert expected[0] != expected[1]
    stop = threading.Event()

    def publish() -> None:
        n = 0
        while not stop.is_set():
            metrics.publish(states[n % 2])
            n += 1

    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    seen = []
    try:
        for _ in range(300):
            seen.append(seed_only(parse(metrics.exposition())))
    finally:
        stop.set()
        thread.join()
    assert all(s in expected for s in seen)


def test_metrics_endpoint_serves_the_exposition() -> None:
    metrics = ControllerMetrics()
    metrics.publish(_state("a"))
    server = serve(("127.0.0.1", 0), registry=metrics.exposition, ready=lambda: True)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = resp.read()
            content_type = resp.headers["Content-Type"]
    finally:
        server.shutdown()
        server.server_close()
    assert body == generate_latest(metrics.registry)
    assert content_type == CONTENT_TYPE_LATEST
