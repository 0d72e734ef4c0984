"""The ComputeDomain controller's edge: observe the cluster, plan, apply (kube I/O only).

Each pass lists everything anew and applies :func:`~.reconcile.plan`; nothing is kept
between passes but the events already posted (so one condition is reported once).
"""

from __future__ import annotations

import datetime
import logging
import threading
from collections.abc import Callable
from typing import Any, Final

from dra_api_types import ComputeDomain, ComputeDomainClique
from dra_kube_client import JsonTransport, KubeApiError
from dra_kube_client.informers import Resource

from .api_paths import (
    Permission,
    collection_path,
    collection_resource,
    node_path,
    object_path,
)
from .manifests import DaemonSettings
from .names import COMPUTE_DOMAIN_LABEL, FINALIZER
from .reconcile import (
    Action,
    AddFinalizer,
    Create,
    Delete,
    Event,
    Observed,
    PruneClique,
    RemoveFinalizer,
    UnlabelNode,
    WriteStatus,
    owned_object_from_api,
    plan,
    stale_uids,
)
from .status import daemon_pod_from_api

__all__ = ["CLUSTER_REQUESTS", "NAMESPACE_REQUESTS", "ComputeDomainController"]

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
_SELECTOR = {"labelSelector": COMPUTE_DOMAIN_LABEL}
_FOLLOWER_POLL_S = 2.0


class ComputeDomainController:
    """Reconciles every ComputeDomain of the cluster through ``transport``."""

    def __init__(self, transport: JsonTransport, settings: DaemonSettings) -> None:
        """Daemon objects go to ``settings.namespace`` (the driver namespace)."""
        self._transport = transport
        self._settings = settings
        self._posted: set[tuple[str, str, str]] = set()

    def _items(self, path: str, query: dict[str, str] | None = None) -> list[dict[str, Any]]:
        answer = self._transport.request("GET", path, query=query)
        return [i for i in answer.get("items") or [] if isinstance(i, dict)]

    def observe(self) -> Observed:
        """List what the plan needs; domains last (see :mod:`.reconcile`)."""
        ns = self._settings.namespace
        # All nodes, not only labelled ones: a daemon on a node that is gone is gone too,
        # whether or not the pod garbage collector has removed its pod yet.
        all_nodes = self._items("/api/v1/nodes")
        node_names = frozenset(str((n.get("metadata") or {}).get("name", "")) for n in all_nodes)
        nodes = {}
        for n in all_nodes:
            labels = (n.get("metadata") or {}).get("labels") or {}
            if COMPUTE_DOMAIN_LABEL in labels:
                nodes[str(n["metadata"]["name"])] = str(labels[COMPUTE_DOMAIN_LABEL])
        objects = [
            owned_object_from_api("DaemonSet", o)
            for o in self._items(collection_path("DaemonSet", ns), _SELECTOR)
        ]
        objects += [
            owned_object_from_api("ResourceClaimTemplate", o)
            for o in self._items(collection_path("ResourceClaimTemplate"), _SELECTOR)
        ]
        raw_cliques = self._items(collection_path("ComputeDomainClique", ns))
        objects += [owned_object_from_api("ComputeDomainClique", o) for o in raw_cliques]
        pods = [daemon_pod_from_api(p) for p in self._items(collection_path("Pod", ns), _SELECTOR)]
        domains = [
            ComputeDomain.from_dict(d) for d in self._items(collection_path("ComputeDomain"))
        ]
        return Observed(
            domains=tuple(domains),
            objects=tuple(o for o in objects if o.domain_uid),
            cliques=tuple(ComputeDomainClique.from_dict(c) for c in raw_cliques),
            pods=tuple(p for p in pods if p.domain_uid),
            node_labels=nodes,
            node_names=node_names,
        )

    def reconcile_once(self) -> list[Action]:
        """One pass: observe, plan, apply. Returns the actions attempted."""
        observed = self.observe()
        stale = list(stale_uids(observed))
        if stale:
            log.info("cleaning up stale objects", extra={"event": "stale_cleanup", "uids": stale})
        actions = plan(observed, self._settings)
        for action in actions:
            try:
                self._apply(action)
            except KubeApiError as exc:
                # The next pass recomputes the plan; a conflict or a vanished object is normal.
                log.warning(
                    "action failed",
                    extra={"event": "action_failed", "action": repr(action), "error": str(exc)},
                )
        return actions

    def run(
        self,
        stop: threading.Event,
        *,
        interval_s: float = 2.0,
        is_leader: Callable[[], bool] = lambda: True,
        wake: threading.Event | None = None,
    ) -> None:
        """Reconcile until ``stop`` is set, while leader: when ``wake`` is set (a watched
        change), else every ``interval_s`` seconds (the resync; the only trigger without
        ``wake``)."""
        while not stop.is_set():
            leader = is_leader()
            if leader:
                if wake is not None:
                    # Cleared before the pass: a change during it triggers the next one.
                    wake.clear()
                try:
                    self.reconcile_once()
                except KubeApiError as exc:
                    log.warning(
                        "pass failed", extra={"event": "reconcile_failed", "error": str(exc)}
                    )
            if wake is None:
                stop.wait(interval_s)
            elif leader:
                wake.wait(interval_s)
            else:
                # A follower only waits to become leader (no API requests meanwhile).
                stop.wait(min(interval_s, _FOLLOWER_POLL_S))

    def watched(self) -> tuple[Resource, ...]:
        """What a :class:`~.change_watch.ChangeWatch` watches for this controller."""
        ns = self._settings.namespace
        return (
            collection_resource("ComputeDomain"),
            collection_resource("ComputeDomainClique", ns),
            collection_resource("Pod", ns, label_selector=COMPUTE_DOMAIN_LABEL),
            collection_resource("Node"),
        )

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
