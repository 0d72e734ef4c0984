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

``/metrics`` serves :meth:`ControllerMetrics.exposition`: the seed's families as text
rendered once per published state (:mod:`.seed_text`; they are one series per claim, and
prometheus_client's rendering of them on every scrape was most of a scrape's cost), then
the controller's own metrics rendered live, so a counter incremented between reconciles
shows on the next scrape. The text is what ``generate_latest(registry)`` writes, which
still renders everything through prometheus_client.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from dra_kube_client.informers.informer import InformerStats
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from .availability import AvailableSeries
from .claim_series import ClaimSeries
from .seed_text import SeedText, seed_families, sorted_available

PREFIX = "dra_allocation_controller"
#: The histogram of each reconcile's wall time (the scale benchmark reads it too).
RECONCILE_SECONDS = f"{PREFIX}_reconcile_duration_seconds"
#: The informers' counters by kind: watches reopened, full lists (the scale benchmark too).
WATCH_RESTARTS = f"{PREFIX}_watch_restarts"
RELISTS = f"{PREFIX}_relists"


@dataclass(slots=True)
class ClusterSeries:
    """One reconcile's answer for the seed's three metrics."""

    allocated: list[ClaimSeries] = field(default_factory=list)
    pending: list[ClaimSeries] = field(default_factory=list)
    unsatisfiable: list[ClaimSeries] = field(default_factory=list)
    available: Mapping[AvailableSeries, int] = field(default_factory=dict)


class _SeedCollector(Collector):
    """The seed's families: through prometheus_client (``collect``) or as cached text."""

    def __init__(self) -> None:
        self.series = ClusterSeries()
        self.generation = 0
        self.lock = threading.Lock()
        # One render at a time; the text is kept until the next publish.
        self.render_lock = threading.Lock()
        self.seed_text = SeedText()
        self.rendered: tuple[int, bytes] = (-1, b"")

    def publish(self, series: ClusterSeries) -> None:
        with self.lock:
            self.series = series
            self.generation += 1

    def collect(self) -> Iterable[GaugeMetricFamily]:
        with self.lock:
            series = self.series
        allocated, pending, unsatisfiable, available = seed_families()
        for s in series.allocated:
            allocated.add_metric([s.namespace, s.name, s.resource_class], 1)
        for s in series.pending:
            pending.add_metric([s.namespace, s.name, s.resource_class], 1)
        for s in series.unsatisfiable:
            unsatisfiable.add_metric([s.namespace, s.name, s.resource_class], 1)
        for key, count in sorted_available(series.available):
            available.add_metric([key.node, key.resource_class, key.attribute], count)
        return [allocated, pending, unsatisfiable, available]

    def text(self) -> bytes:
        """The exposition text of the published series, rendered once per publish."""
        with self.render_lock:
            with self.lock:
                series, generation = self.series, self.generation
            if self.rendered[0] != generation:
                body = self.seed_text.render(
                    series.allocated, series.pending, series.unsatisfiable, series.available
                )
                self.rendered = (generation, body)
            return self.rendered[1]


class _InformerCollector(Collector):
    def __init__(self, stats: Callable[[], Mapping[str, tuple[int, InformerStats]]]) -> None:
        self.stats = stats

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        size = GaugeMetricFamily(
            f"{PREFIX}_cache_objects", "Objects in the informer cache, by kind", labels=["kind"]
        )
        restarts = CounterMetricFamily(
            WATCH_RESTARTS,
            "Watches restarted (ended, broken, or expired), by kind",
            labels=["kind"],
        )
        relists = CounterMetricFamily(
            RELISTS,
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
        informers = _InformerCollector(informer_stats)
        self.registry.register(informers)
        self.reconcile_seconds = Histogram(
            RECONCILE_SECONDS,
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

        # Everything but the seed's families, in the registry's order: rendered per scrape.
        self._live = CollectorRegistry(auto_describe=False)
        for collector in (
            informers,
            self.reconcile_seconds,
            self.reconciles,
            self.events,
            self.leader,
        ):
            self._live.register(collector)

    def publish(self, series: ClusterSeries) -> None:
        """Swap in one reconcile's seed series (rendered at the next scrape)."""
        self._seed.publish(series)

    def exposition(self) -> bytes:
        """What ``/metrics`` serves: the text ``generate_latest(self.registry)`` writes.

        The seed's families are rendered once per publish and the same bytes served until
        the next; the rest is rendered now. Only this class's metrics: collectors others
        register on a ``registry`` they passed in are not in it.
        """
        return self._seed.text() + generate_latest(self._live)
