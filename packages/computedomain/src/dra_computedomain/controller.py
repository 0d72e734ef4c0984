"""The ComputeDomain controller's edge: per domain, observe the caches, plan, apply.

The caches (:mod:`.controller_cache`, informers) say which domains a change concerns; those
go to a coalescing queue (:mod:`.work_queue`), and each is reconciled alone:
:func:`~.reconcile.plan_domain` on what the caches hold, then its actions applied (the only
requests, besides the reads of an object about to be updated). Every domain is reconciled
again every resync period, from the caches. Nothing else is kept between reconciles but the
events already posted (so one condition is reported once).
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Final

from dra_kube_client import JsonTransport, KubeApiError

from .api_paths import Permission, collection_path, node_path, object_path
from .controller_cache import ControllerCache
from .manifests import DaemonSettings
from .names import COMPUTE_DOMAIN_LABEL, FINALIZER
from .reconcile import (
    Action,
    AddFinalizer,
    Create,
    Delete,
    Event,
    PruneClique,
    RemoveFinalizer,
    UnlabelNode,
    WriteStatus,
    plan_domain,
    stale_uids,
)
from .work_queue import KeyQueue

__all__ = ["CLUSTER_REQUESTS", "NAMESPACE_REQUESTS", "QUEUE_DELAY_S", "ComputeDomainController"]

log = logging.getLogger(__name__)
_COMPONENT = "compute-domain-controller"

#: What the controller asks of the API server across the cluster (the chart's ClusterRole).
CLUSTER_REQUESTS: Final[frozenset[Permission]] = frozenset(
    {
        ("resource.nvidia.com", "computedomains", "list"),
        ("resource.nvidia.com", "computedomains", "watch"),
        ("resource.nvidia.com", "computedomains", "get"),
        ("resource.nvidia.com", "computedomains", "patch"),
        ("resource.nvidia.com", "computedomains", "update"),
        ("resource.nvidia.com", "computedomains/status", "patch"),
        ("resource.k8s.io", "resourceclaimtemplates", "list"),
        ("resource.k8s.io", "resourceclaimtemplates", "watch"),
        ("resource.k8s.io", "resourceclaimtemplates", "get"),
        ("resource.k8s.io", "resourceclaimtemplates", "create"),
        ("resource.k8s.io", "resourceclaimtemplates", "patch"),
        ("resource.k8s.io", "resourceclaimtemplates", "update"),
        ("resource.k8s.io", "resourceclaimtemplates", "delete"),
        ("", "nodes", "list"),
        ("", "nodes", "watch"),
        ("", "nodes", "patch"),
        ("", "events", "create"),
    }
)
#: ... and in the driver namespace only (the chart's Role there), leader election included.
NAMESPACE_REQUESTS: Final[frozenset[Permission]] = frozenset(
    {
        ("apps", "daemonsets", "list"),
        ("apps", "daemonsets", "watch"),
        ("apps", "daemonsets", "get"),
        ("apps", "daemonsets", "create"),
        ("apps", "daemonsets", "patch"),
        ("apps", "daemonsets", "update"),
        ("apps", "daemonsets", "delete"),
        ("resource.nvidia.com", "computedomaincliques", "list"),
        ("resource.nvidia.com", "computedomaincliques", "watch"),
        ("resource.nvidia.com", "computedomaincliques", "get"),
        ("resource.nvidia.com", "computedomaincliques", "patch"),
        ("resource.nvidia.com", "computedomaincliques", "update"),
        ("resource.nvidia.com", "computedomaincliques", "delete"),
        ("", "pods", "list"),
        ("", "pods", "watch"),
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "update"),
    }
)
_FOLLOWER_POLL_S = 2.0
#: How long a domain's first change is held, so a burst of changes is one reconcile.
QUEUE_DELAY_S: Final = 0.1


class ComputeDomainController:
    """Reconciles every ComputeDomain of the cluster, one domain at a time, from caches."""

    def __init__(
        self,
        transport: JsonTransport,
        settings: DaemonSettings,
        *,
        cache: ControllerCache | None = None,
        queue: KeyQueue | None = None,
    ) -> None:
        """Daemon objects go to ``settings.namespace`` (the driver namespace). ``cache``
        (default: informers over ``transport``) is what reconciles read; ``queue`` (default:
        held :data:`QUEUE_DELAY_S`) folds the domains its changes concern."""
        self._transport = transport
        self._settings = settings
        self.cache = cache if cache is not None else ControllerCache(transport, settings.namespace)
        self.queue = queue if queue is not None else KeyQueue(delay_s=QUEUE_DELAY_S)
        self.cache.subscribe(self.queue.add)
        self._posted: set[tuple[str, str, str]] = set()
        #: reconciles per domain UID since start (logs and tests)
        self.reconciles: Counter[str] = Counter()

    def reconcile(self, uid: str) -> list[Action]:
        """Plan the domain ``uid`` from the caches and apply; returns the actions attempted.

        A domain that is gone has its leftover objects and node labels removed.
        """
        self.reconciles[uid] += 1
        observed = self.cache.observe(uid)
        # NVIDIA's "Processing added or updated ComputeDomain" (its -v 2): shown from -v 1.
        log.debug(
            "processing ComputeDomain",
            extra={"event": "reconcile", "domain_uid": uid, "found": bool(observed.domains)},
        )
        if not observed.domains:
            stale = list(stale_uids(observed))
            if stale:
                log.info(
                    "cleaning up stale objects", extra={"event": "stale_cleanup", "uids": stale}
                )
        actions = plan_domain(observed, self._settings, uid)
        for action in actions:
            try:
                self._apply(action)
            except KubeApiError as exc:
                # The next reconcile recomputes the plan; a conflict or a vanished object is
                # normal.
                log.warning(
                    "action failed",
                    extra={"event": "action_failed", "action": repr(action), "error": str(exc)},
                )
        return actions

    def reconcile_all(self) -> list[Action]:
        """Reconcile every domain the caches know (the resync); returns the actions."""
        actions: list[Action] = []
        for uid in sorted(self.cache.uids()):
            actions += self.reconcile(uid)
        return actions

    def reconcile_once(self) -> list[Action]:
        """One pass from scratch: list every collection into the caches (the domains last),
        then reconcile every domain. Returns the actions attempted.

        Raises:
            KubeApiError: a list failed.
        """
        self.cache.list_all()
        return self.reconcile_all()

    def process_ready(self) -> int:
        """Reconcile each domain whose changes are due in the queue; returns how many."""
        count = 0
        while (uid := self.queue.pop_ready()) is not None:
            self._process(uid)
            count += 1
        return count

    def _process(self, uid: str) -> None:
        try:
            self.reconcile(uid)
        except KubeApiError as exc:
            log.warning(
                "reconcile failed",
                extra={"event": "reconcile_failed", "domain_uid": uid, "error": str(exc)},
            )
        finally:
            self.queue.done(uid)

    def run(
        self,
        stop: threading.Event,
        *,
        interval_s: float = 30.0,
        is_leader: Callable[[], bool] = lambda: True,
    ) -> None:
        """Start the caches, then reconcile until ``stop`` is set, while leader: each domain
        a change concerns (after the queue's hold), and every domain every ``interval_s``
        seconds and on becoming leader (from the caches: no list)."""
        self.cache.start(stop)
        # Not before the domains are listed: an object whose domain is not in the cache yet
        # would look like a leftover of a deleted domain.
        while not stop.is_set() and not self.cache.synced():
            stop.wait(0.1)
        resync_at = 0.0  # due at once: the first reconcile of every domain
        leading = False
        while not stop.is_set():
            if not is_leader():
                # A follower keeps its caches warm and only waits to become leader.
                leading = False
                stop.wait(min(interval_s, _FOLLOWER_POLL_S))
                continue
            if not leading or time.monotonic() >= resync_at:
                leading = True
                resync_at = time.monotonic() + interval_s
                self.queue.add(self.cache.uids())
            # Bounded, so a stop, a resync or a lost lease is noticed within a second.
            uid = self.queue.get(min(1.0, max(resync_at - time.monotonic(), 0.0)))
            if uid is not None:
                self._process(uid)

    # --------------------------------------------------------------------- apply
    def _apply(self, action: Action) -> None:
        t = self._transport
        match action:
            case Create(kind=kind, body=body):
                meta = body["metadata"]
                try:
                    t.request("POST", collection_path(kind, meta["namespace"]), body=body)
                except KubeApiError as exc:
                    if exc.status != 409:
                        raise
                    return
                log.info(
                    "created",
                    extra={
                        "event": "created",
                        "kind": kind,
                        "namespace": meta["namespace"],
                        "object": meta["name"],
                    },
                )
            case Delete(kind=kind, namespace=ns, name=name):
                try:
                    t.request("DELETE", object_path(kind, ns, name))
                except KubeApiError as exc:
                    if exc.status != 404:
                        raise
                    return
                log.info(
                    "deleted",
                    extra={"event": "deleted", "kind": kind, "namespace": ns, "object": name},
                )
            case AddFinalizer(namespace=ns, name=name):
                self._edit_finalizers("ComputeDomain", ns, name, add=True)
            case RemoveFinalizer(kind=kind, namespace=ns, name=name):
                self._edit_finalizers(kind, ns, name, add=False)
            case UnlabelNode(node=node, domain_uid=uid):
                key = COMPUTE_DOMAIN_LABEL.replace("~", "~0").replace("/", "~1")
                patch = [
                    {"op": "test", "path": f"/metadata/labels/{key}", "value": uid},
                    {"op": "remove", "path": f"/metadata/labels/{key}"},
                ]
                try:
                    t.request(
                        "PATCH",
                        node_path(node),
                        body=patch,
                        content_type="application/json-patch+json",
                    )
                except KubeApiError as exc:
                    # 422: the label changed meanwhile (another domain's now); 404: node gone.
                    if exc.status not in (404, 422):
                        raise
                    return
                log.info(
                    "node unlabelled",
                    extra={"event": "node_unlabelled", "node": node, "domain_uid": uid},
                )
            case WriteStatus(namespace=ns, name=name, status=status):
                body = {
                    "status": {
                        "status": status.get("status", "NotReady"),
                        "nodes": status.get("nodes") or [],
                    }
                }
                t.request(
                    "PATCH",
                    object_path("ComputeDomain", ns, name) + "/status",
                    body=body,
                    content_type="application/merge-patch+json",
                )
                log.info(
                    "status written",
                    extra={
                        "event": "status",
                        "namespace": ns,
                        "object": name,
                        "status": body["status"]["status"],
                    },
                )
            case PruneClique():
                self._prune(action)
            case Event():
                self._post_event(action)

    def _edit_finalizers(self, kind: str, ns: str, name: str, *, add: bool) -> None:
        path = object_path(kind, ns, name)
        try:
            obj = self._transport.request("GET", path)
        except KubeApiError as exc:
            if exc.status == 404:
                return
            raise
        finalizers = list(obj.get("metadata", {}).get("finalizers") or [])
        if add == (FINALIZER in finalizers):
            return
        finalizers = [*finalizers, FINALIZER] if add else [f for f in finalizers if f != FINALIZER]
        rv = obj["metadata"]["resourceVersion"]
        obj["metadata"]["finalizers"] = finalizers
        try:
            # An update of the object as read, not a patch: the API server compares the opaque
            # parameters of a ResourceClaimTemplate byte by byte, and a patch re-serializes
            # them (compact JSON), which differs from what this client sent at create time
            # ("spec: field is immutable"); sent back the way they were sent, they are equal.
            # The resourceVersion in ``obj`` makes it optimistic (409: the next pass decides).
            self._transport.request("PUT", path, body=obj)
        except KubeApiError as exc:
            if exc.status == 422:
                # Made by a client that serializes compactly (a Go controller): the patch fits.
                self._patch_finalizers(path, rv, finalizers)
            elif exc.status not in (404, 409):
                raise

    def _patch_finalizers(self, path: str, rv: str, finalizers: list[str]) -> None:
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/metadata/finalizers", "value": finalizers},
        ]
        try:
            self._transport.request(
                "PATCH", path, body=patch, content_type="application/json-patch+json"
            )
        except KubeApiError as exc:
            if exc.status not in (404, 409, 422):
                raise

    def _prune(self, action: PruneClique) -> None:
        path = object_path("ComputeDomainClique", action.namespace, action.name)
        try:
            clique = self._transport.request("GET", path)
        except KubeApiError as exc:
            if exc.status == 404:
                return
            raise
        if clique["metadata"].get("resourceVersion") != action.resource_version:
            return  # changed since the observation: the next pass decides again
        clique["daemons"] = list(action.keep)
        try:
            self._transport.request("PUT", path, body=clique)
        except KubeApiError as exc:
            if exc.status not in (404, 409):
                raise
            return
        log.info(
            "clique pruned",
            extra={"event": "clique_pruned", "clique": action.name, "nodes": list(action.dropped)},
        )

    def _post_event(self, event: Event) -> None:
        key = (event.uid, event.reason, event.message)
        if key in self._posted:
            return
        self._posted.add(key)
        log.info(
            event.message,
            extra={
                "event": "domain_event",
                "reason": event.reason,
                "namespace": event.namespace,
                "domain": event.name,
                "uid": event.uid,
            },
        )
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{event.name}.", "namespace": event.namespace},
            "involvedObject": {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "ComputeDomain",
                "namespace": event.namespace,
                "name": event.name,
                "uid": event.uid,
            },
            "reason": event.reason,
            "message": event.message[:1024],
            "type": event.type,
            "source": {"component": _COMPONENT},
            "reportingComponent": _COMPONENT,
            "reportingInstance": _COMPONENT,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self._transport.request("POST", collection_path("Event", event.namespace), body=body)
        except KubeApiError as exc:
            log.warning("event not posted", extra={"event": "event_failed", "error": str(exc)})
