"""The reconcile loop: informer caches -> metrics, and Events for unschedulable pods.

The leader diagnoses unschedulable pods (with or without Events to post); the claims its
last diagnosis of each still-unschedulable pod found unsatisfiable, while still pending, are
``kube_resourceclaim_unsatisfiable`` (followers export none, so a sum over replicas counts
each claim once).

Every change to a cache marks the controller dirty; changes arriving together (a burst of
watch events) are folded into one reconcile after ``debounce_s``. A resync every
``resync_s`` re-diagnoses pods still pending. Only the leader posts Events; every replica
serves metrics, so a scrape of any replica answers. After each reconcile the loop freezes
the heap, so that the garbage collector's full collections do not walk the caches
(:mod:`.heap`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dra_allocator.cel_engine import CelEngine
from dra_allocator.cluster import Cluster
from dra_allocator.features import Features
from dra_allocator.model import ClaimInfo
from dra_allocator.pool_cache import PoolCache
from dra_allocator.selectors import SelectorEngine
from dra_allocator.snapshot import Snapshot
from dra_allocator.state import StateCache
from dra_kube_client.informers.store import Store

from .availability import AvailabilityCache, free_devices
from .claim_series import ClaimSeries, SeriesCache, claim_series
from .diagnosis import Finding, diagnose_pod, is_unschedulable, make_cluster, pod_uid
from .events import REASON, EventPublisher, InvolvedObject
from .heap import HeapPolicy
from .metrics import ClusterSeries, ControllerMetrics
from .view import ClusterView

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Settings:
    """Timings of the loop."""

    debounce_s: float = 0.2
    # Under a steady stream of changes reconciles take at most this share of a core: after
    # a reconcile of t seconds the next waits t * (1 / max_busy - 1), at most max_pause_s
    # (the metrics' lag stays bounded on a cluster big enough to make reconciles slow).
    # 0.1 and 1 s put the 1,000-node run's metrics lag p99 at 1.8 s (target 2 s); 0.2 and
    # 0.5 s at 1.3-1.4 s, but there the controller took the scheduler's last idle fifth of
    # a core on the 2-vCPU VM (docs/scale.md, run 6). With max_pause_s bounding the lag,
    # the busy share can be small: a reconcile of 25 ms then waits the whole 0.475 s.
    max_busy: float = 0.05
    max_pause_s: float = 0.5
    resync_s: float = 30.0
    # A pod is diagnosed again at most this often (diagnosis looks at every node).
    diagnose_every_s: float = 30.0
    # At most this many pods are diagnosed per reconcile; the rest wait for the next.
    max_pods_per_reconcile: int = 50
    # The loop freezes the heap after each reconcile and collects all of it this often
    # (heap.HeapPolicy); None leaves the garbage collector as Python has it.
    full_gc_every_s: float | None = 600.0


def pause_after(spent_s: float, settings: Settings) -> float:
    """How long the loop waits after a change before reconciling, given that the last
    reconcile took ``spent_s``."""
    paced = spent_s * (1.0 / settings.max_busy - 1.0) if settings.max_busy > 0 else 0.0
    return max(settings.debounce_s, min(paced, settings.max_pause_s))


class AllocationController:
    """Keeps the metrics current and explains unschedulable pods."""

    def __init__(
        self,
        stores: Mapping[str, Store],
        *,
        metrics: ControllerMetrics,
        publisher: EventPublisher | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        engine: SelectorEngine | None = None,
        features: Features | None = None,
        settings: Settings | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Read ``stores`` (by kind); publish to ``metrics``; post through ``publisher``."""
        self.view = ClusterView(stores=stores, on_error=self._unreadable)
        self.metrics = metrics
        self.publisher = publisher
        self.is_leader = is_leader
        self.engine = engine if engine is not None else CelEngine()
        self.features = features if features is not None else Features()
        self.settings = settings if settings is not None else Settings()
        self.clock = clock
        self.dirty = threading.Event()
        self.reconciled = threading.Event()
        self._diagnosed: dict[str, float] = {}
        self._series_cache = SeriesCache()
        # pod UID -> its claims the last diagnosis found unsatisfiable
        self._unsatisfiable: dict[str, list[ClaimInfo]] = {}
        self._availability_cache = AvailabilityCache()
        # Creating pods changes claims, not slices: the nodes' pools carry over, and the
        # allocated state is updated by the claims that changed.
        self._pool_cache = PoolCache()
        self._state_cache = StateCache()
        # After the view's own listeners (it subscribed when made, above): a change is
        # recorded in the view before the loop is woken for it, so the reconcile it wakes
        # cannot miss it.
        for store in stores.values():
            store.subscribe(lambda *_: self.dirty.set())

    def _unreadable(self, kind: str, key: str, exc: Exception) -> None:
        log.error(
            f"cannot read {kind} {key}: {exc}",
            extra={"event": "object_rejected", "kind": kind, "object": key, "error": str(exc)},
        )

    def reconcile(self) -> tuple[ClusterSeries, list[Finding]]:
        """One pass: metrics from the caches, then diagnoses of due unschedulable pods."""
        started = time.perf_counter()
        snapshot = self.view.snapshot()
        cluster = make_cluster(
            snapshot,
            engine=self.engine,
            features=self.features,
            pool_cache=self._pool_cache,
            state_cache=self._state_cache,
        )
        allocated, pending = claim_series(
            snapshot.claims, self._series_cache, snapshot.claim_changes
        )
        available = free_devices(cluster, self._availability_cache)
        findings: list[Finding] = []
        if self.is_leader():
            findings = self._diagnose(cluster, snapshot)
        else:
            self._unsatisfiable = {}
        series = ClusterSeries(
            allocated=allocated,
            pending=pending,
            unsatisfiable=self._unsatisfiable_series(pending),
            available=available,
        )
        self.metrics.publish(series)
        self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
        self.metrics.reconciles.labels(result="ok").inc()
        self.reconciled.set()
        return series, findings

    def _unsatisfiable_series(self, pending: list[ClaimSeries]) -> list[ClaimSeries]:
        """The pending series of the claims the last diagnoses found unsatisfiable."""
        found = {(c.namespace, c.name) for claims in self._unsatisfiable.values() for c in claims}
        return [s for s in pending if (s.namespace, s.name) in found]

    def _diagnose(self, cluster: Cluster, snapshot: Snapshot) -> list[Finding]:
        now = self.clock()
        unschedulable = [p for p in snapshot.pods if is_unschedulable(p)]
        live = {pod_uid(p) for p in unschedulable}
        self._diagnosed = {uid: t for uid, t in self._diagnosed.items() if uid in live}
        self._unsatisfiable = {u: c for u, c in self._unsatisfiable.items() if u in live}
        due = [
            p
            for p in unschedulable
            if now - self._diagnosed.get(pod_uid(p), -1e18) >= self.settings.diagnose_every_s
        ][: self.settings.max_pods_per_reconcile]
        findings: list[Finding] = []
        for pod in due:
            self._diagnosed[pod_uid(pod)] = now
            try:
                found = diagnose_pod(cluster, snapshot, pod)
            except Exception as exc:  # one pod's bad input must not stop the others
                log.error(
                    f"cannot diagnose pod: {exc}",
                    extra={"event": "diagnosis_failed", "pod": pod_uid(pod), "error": str(exc)},
                )
                continue
            findings.extend(found)
            self._unsatisfiable[pod_uid(pod)] = [f.claim for f in found]
            for finding in found:
                self._publish(finding)
        if self.publisher is not None:
            claim_uids = {c.uid for c in snapshot.claims}
            self.publisher.forget_except(live | claim_uids, reason=REASON)
        return findings

    def _publish(self, finding: Finding) -> None:
        if self.publisher is None:
            return
        pod = finding.pod
        self.publisher.warn(
            InvolvedObject("v1", "Pod", pod.namespace, str(pod.metadata.name), pod_uid(pod)),
            finding.message,
        )
        claim = finding.claim
        self.publisher.warn(
            InvolvedObject(
                "resource.k8s.io/v1", "ResourceClaim", claim.namespace, claim.name, claim.uid
            ),
            finding.message,
        )

    def run(self, stop: threading.Event, *, ready: Callable[[], bool] = lambda: True) -> None:
        """Reconcile on changes (debounced, and paced by :func:`pause_after`) and every
        ``resync_s`` until ``stop``."""
        every = self.settings.full_gc_every_s
        heap = HeapPolicy(every, clock=self.clock) if every is not None else None
        while not stop.is_set() and not ready():
            stop.wait(0.1)
        self.dirty.set()
        pause = self.settings.debounce_s
        try:
            while not stop.is_set():
                self.dirty.wait(self.settings.resync_s)
                if stop.is_set():
                    return
                stop.wait(pause)
                self.dirty.clear()
                started = time.perf_counter()
                self._reconcile_logged()
                pause = pause_after(time.perf_counter() - started, self.settings)
                if heap is not None:
                    heap.after_reconcile(
                        slices_dropped=self.view.slices_dropped,
                        slices_cached=self.view.slices_parsed,
                    )
        finally:
            if heap is not None:
                heap.release()

    def _reconcile_logged(self) -> None:
        try:
            self.reconcile()
        except Exception as exc:  # keep serving; the next change or resync retries
            self.metrics.reconciles.labels(result="error").inc()
            log.exception(
                f"reconcile failed: {exc}",
                extra={"event": "reconcile_failed", "error": str(exc)},
            )
