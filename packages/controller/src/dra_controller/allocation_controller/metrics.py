"""The controller's Prometheus metrics: the seed article's names, and its own.

* ``kube_resourceclaim_allocated{namespace,name,resource_class}``: 1 per allocated claim,
* ``kube_resourceclaim_pending{namespace,name,resource_class}``: 1 per claim waiting,
* ``kube_resourceclaim_unsatisfiable{namespace,name,resource_class}``: 1 per pending claim
  that an unschedulable pod waits for and that no node can satisfy (the leader's last
  diagnosis of the pod; what ``DRAResourceExhausted`` counts),
* ``node_dra_resource_available{node,resource_class,attribute}``: free devices,
* ``dra_allocation_controller_*``: reconcile latency, cache sizes, watch restarts, events,
  objects rejected, leadership.

The seed's series are computed by each reconcile and swapped in whole, so a scrape never
sees half of one reconcile and half of the next.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from dra_kube_client.informers.informer import InformerStats
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .availability import AvailableSeries
from .claim_series import ClaimSeries

PREFIX = "dra_allocation_controller"


@dataclass(slots=True)
class ClusterSeries:
    """One reconcile's answer for the seed's three metrics."""

    allocated: list[ClaimSeries] = field(default_factory=list)
    pending: list[ClaimSeries] = field(default_factory=list)
    unsatisfiable: list[ClaimSeries] = field(default_factory=list)
    available: Mapping[AvailableSeries, int] = field(default_factory=dict)


class _SeedCollector(Collector):
    def __init__(self) -> None:
        self.series = ClusterSeries()
        self.lock = threading.Lock()

    def collect(self) -> Iterable[GaugeMetricFamily]:
        with self.lock:
            series = self.series
        allocated = GaugeMetricFamily(
            "kube_resourceclaim_allocated",
            "1 for each allocated ResourceClaim, by the DeviceClass of its requests",
            labels=["namespace", "name", "resource_class"],
        )
        for s in series.allocated:
            allocated.add_metric([s.namespace, s.name, s.resource_class], 1)
        pending = GaugeMetricFamily(
            "kube_resourceclaim_pending",
            "1 for each ResourceClaim waiting for allocation, by the DeviceClass of its requests",
            labels=["namespace", "name", "resource_class"],
        )
        for s in series.pending:
            pending.add_metric([s.namespace, s.name, s.resource_class], 1)
        unsatisfiable = GaugeMetricFamily(
            "kube_resourceclaim_unsatisfiable",
            "1 for each pending ResourceClaim that an unschedulable pod waits for and that no "
            "node can satisfy, by the DeviceClass of its requests",
            labels=["namespace", "name", "resource_class"],
        )
        for s in series.unsatisfiable:
            unsatisfiable.add_metric([s.namespace, s.name, s.resource_class], 1)
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
        return [allocated, pending, unsatisfiable, available]


class _InformerCollector(Collector):
    def __init__(self, stats: Callable[[], Mapping[str, tuple[int, InformerStats]]]) -> None:
        self.stats = stats

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        size = GaugeMetricFamily(
            f"{PREFIX}_cache_objects", "Objects in the informer cache, by kind", labels=["kind"]
        )
        restarts = CounterMetricFamily(
            f"{PREFIX}_watch_restarts",
            "Watches restarted (ended, broken, or expired), by kind",
            labels=["kind"],
        )
        relists = CounterMetricFamily(
            f"{PREFIX}_relists",
            "Full lists (the first, and after 410 Gone), by kind",
            labels=["kind"],
        )
        rejected = CounterMetricFamily(
            f"{PREFIX}_objects_rejected",
            "Objects left out of the cache because they could not be read, by kind",
            labels=["kind"],
        )
        for kind, (count, stats) in sorted(self.stats().items()):
            size.add_metric([kind], count)
            restarts.add_metric([kind], stats.watch_restarts)
            relists.add_metric([kind], stats.lists)
            rejected.add_metric([kind], stats.rejected)
        return [size, restarts, relists, rejected]


class ControllerMetrics:
    """Every metric of the controller, on a registry of its own."""

    def __init__(
        self,
        informer_stats: Callable[[], Mapping[str, tuple[int, InformerStats]]] = dict,
        registry: CollectorRegistry | None = None,
    ) -> None:
        """Register the metrics; ``informer_stats`` gives (cache size, stats) per kind."""
        self.registry = registry if registry is not None else CollectorRegistry()
        self._seed = _SeedCollector()
        self.registry.register(self._seed)
        self.registry.register(_InformerCollector(informer_stats))
        self.reconcile_seconds = Histogram(
            f"{PREFIX}_reconcile_duration_seconds",
            "Time from a cache change to updated metrics and diagnoses",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.reconciles = Counter(
            f"{PREFIX}_reconciles", "Reconciles run, by result", ["result"], registry=self.registry
        )
        self.events = Counter(
            f"{PREFIX}_events",
            "Kubernetes Events posted (or suppressed by the rate limit), by reason and outcome",
            ["reason", "outcome"],
            registry=self.registry,
        )
        self.leader = Gauge(
            f"{PREFIX}_leader",
            "1 while this replica holds the leader Lease",
            registry=self.registry,
        )

    def publish(self, series: ClusterSeries) -> None:
        """Swap in one reconcile's seed series."""
        with self._seed.lock:
            self._seed.series = series
