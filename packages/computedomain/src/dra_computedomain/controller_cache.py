"""The ComputeDomain controller's view of the cluster: informer caches, and whom a change concerns.

One :class:`~dra_kube_client.informers.Informer` per collection the plan reads lists it once,
then watches it (bookmarks, resume, relist on ``410``): Nodes (only their names and domain
label are kept), and, labelled ``resource.nvidia.com/computeDomain``, DaemonSets (driver
namespace) and ResourceClaimTemplates (metadata only), daemon pods (placement, IP,
readiness), ComputeDomainCliques (driver namespace), then ComputeDomains. A reconcile reads
these caches (:meth:`ControllerCache.observe`): no request per event.

Each change is mapped to the domain UIDs it concerns, and only those are handed to the
listeners (the controller's queue): a domain's own changes, an object's or a node's domain
label (before and after), a DaemonSet or template at a name a domain wants, and a node that
appears or vanishes to the domains whose cliques or daemon pods name it. A change that leaves
the kept fields as they were (a node's heartbeat, a DaemonSet's status) concerns nobody.

As the listing pass did, the domains are listed last: every object in the caches at the first
reconcile was there before the domain list, so its UID missing from that list means its domain
is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from dra_api_types import ComputeDomain, ComputeDomainClique
from dra_kube_client import Backoff, JsonTransport
from dra_kube_client.informers import Informer, Resource, object_head

from .api_paths import collection_resource
from .errors import SpecError
from .manifests import workload_template_name
from .names import COMPUTE_DOMAIN_LABEL, daemon_object_name
from .reconcile import Observed, OwnedObject, owned_object_from_api
from .status import daemon_pod_from_api

__all__ = ["CACHED_KINDS", "ChangeListener", "ControllerCache"]

RawObject = dict[str, Any]
#: Called with the UIDs of the domains a change concerns (never empty).
ChangeListener = Callable[[frozenset[str]], None]

_DOMAIN = "ComputeDomain"
#: What the controller caches, in the order it lists them (the domains last, see above).
CACHED_KINDS = ("Node", "DaemonSet", "ResourceClaimTemplate", "ComputeDomainClique", "Pod", _DOMAIN)
_OWNED_KINDS = ("DaemonSet", "ResourceClaimTemplate", "ComputeDomainClique")


def _meta(obj: RawObject | None) -> dict[str, Any]:
    return dict((obj or {}).get("metadata") or {})


def _label(obj: RawObject | None) -> str:
    return str((_meta(obj).get("labels") or {}).get(COMPUTE_DOMAIN_LABEL) or "")


def node_fields(obj: RawObject) -> RawObject:
    """A Node as the plan needs it: its name and domain label (2,000 nodes stay small, and a
    status heartbeat changes nothing kept)."""
    kept = object_head(obj, ("name", "uid", "resourceVersion"))
    label = _label(obj)
    if label:
        kept["metadata"]["labels"] = {COMPUTE_DOMAIN_LABEL: label}
    return kept


def owner_fields(obj: RawObject) -> RawObject:
    """A DaemonSet or template reduced to what :func:`~.reconcile.owned_object_from_api`
    reads (their specs and statuses are not the plan's)."""
    return object_head(
        obj,
        (
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "labels",
            "finalizers",
            "deletionTimestamp",
        ),
    )


def daemon_pod_fields(obj: RawObject) -> RawObject:
    """A daemon pod reduced to what :func:`~.status.daemon_pod_from_api` reads."""
    kept = object_head(obj, ("name", "namespace", "uid", "resourceVersion", "labels"))
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    kept["spec"] = {"nodeName": spec.get("nodeName")}
    kept["status"] = {"podIP": status.get("podIP"), "conditions": status.get("conditions")}
    return kept


def _without_version(obj: RawObject) -> RawObject:
    meta = {k: v for k, v in _meta(obj).items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def _resources(namespace: str) -> dict[str, Resource]:
    owned = COMPUTE_DOMAIN_LABEL
    return {
        "Node": _with(collection_resource("Node"), node_fields),
        "DaemonSet": _with(
            collection_resource("DaemonSet", namespace, label_selector=owned), owner_fields
        ),
        "ResourceClaimTemplate": _with(
            collection_resource("ResourceClaimTemplate", label_selector=owned), owner_fields
        ),
        "ComputeDomainClique": collection_resource("ComputeDomainClique", namespace),
        "Pod": _with(
            collection_resource("Pod", namespace, label_selector=owned), daemon_pod_fields
        ),
        _DOMAIN: collection_resource(_DOMAIN),
    }


def _with(resource: Resource, transform: Callable[[RawObject], RawObject]) -> Resource:
    return Resource(
        resource.kind,
        resource.api_version,
        resource.path,
        transform=transform,
        label_selector=resource.label_selector,
    )


class ControllerCache:
    """The informers of everything the plan reads, and the domains each change concerns."""

    def __init__(
        self,
        transport: JsonTransport,
        namespace: str,
        *,
        backoff: Callable[[], Backoff] = Backoff,
        watch_timeout_s: float = 300.0,
    ) -> None:
        """DaemonSets, cliques and daemon pods are read in ``namespace`` (the driver's);
        ``backoff`` makes each informer's retry delays."""
        self.namespace = namespace
        self.informers = {
            kind: Informer(transport, resource, backoff=backoff(), watch_timeout_s=watch_timeout_s)
            for kind, resource in _resources(namespace).items()
        }
        # kind -> key -> (the object less its version, the domain UIDs it concerns)
        self._seen: dict[str, dict[str, tuple[RawObject, frozenset[str]]]] = {
            kind: {} for kind in CACHED_KINDS
        }
        self._lock = threading.Lock()
        self._listeners: list[ChangeListener] = []
        for informer in self.informers.values():
            informer.store.subscribe(self._changed)

    # ------------------------------------------------------------------ running
    def subscribe(self, listener: ChangeListener) -> None:
        """Be told which domains each change concerns (on the informers' threads)."""
        self._listeners.append(listener)

    def list_all(self) -> None:
        """List every collection into its cache, the domains last (a pass from scratch).

        Raises:
            KubeApiError: a list failed.
        """
        for kind in CACHED_KINDS:
            self.informers[kind].list_once()

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        """Run each informer on a daemon thread until ``stop``; the domains' starts once the
        others have listed (or ``stop`` is set), so this returns only then."""
        threads = [self._thread(kind, stop) for kind in CACHED_KINDS if kind != _DOMAIN]
        others = [self.informers[kind] for kind in CACHED_KINDS if kind != _DOMAIN]
        while not stop.is_set() and not all(i.synced.wait(0.5) for i in others):
            pass
        if not stop.is_set():
            threads.append(self._thread(_DOMAIN, stop))
        return threads

    def _thread(self, kind: str, stop: threading.Event) -> threading.Thread:
        informer = self.informers[kind]
        thread = threading.Thread(
            target=informer.run, args=(stop,), name=f"informer-{kind}", daemon=True
        )
        thread.start()
        return thread

    def synced(self) -> bool:
        """Whether every collection has been listed once."""
        return all(i.synced.is_set() for i in self.informers.values())

    # ------------------------------------------------------------------ changes
    def _changed(self, kind: str, key: str) -> None:
        store = self.informers[kind].store
        with self._lock:
            seen = self._seen[kind]
            keys = set(seen) | set(store.items()) if key == "*" else {key}
            refs: dict[str, set[str]] | None = None
            affected: set[str] = set()
            for k in sorted(keys):
                obj = store.get(k)
                old = seen.pop(k, None)
                new = None if obj is None else (_without_version(obj), frozenset[str]())
                if old is not None and new is not None and old[0] == new[0]:
                    seen[k] = old  # nothing the plan reads changed
                    continue
                if new is not None:
                    new = seen[k] = (new[0], self._concerned(kind, obj or {}))
                affected |= (old[1] if old else set()) | (new[1] if new else set())
                if kind == "Node" and (old is None) != (obj is None):
                    # A node appeared or vanished: the domains whose daemons name it.
                    refs = refs if refs is not None else self._node_references()
                    affected |= refs.get(k, set())
        if affected:
            uids = frozenset(affected)
            for listener in self._listeners:
                listener(uids)

    def _concerned(self, kind: str, obj: RawObject) -> frozenset[str]:
        meta = _meta(obj)
        if kind == _DOMAIN:
            return frozenset({str(meta.get("uid") or "")} - {""})
        uids = {_label(obj)} - {""}
        name = str(meta.get("name") or "")
        if kind in ("DaemonSet", "ResourceClaimTemplate") and meta.get("namespace") == (
            self.namespace
        ):
            prefix = daemon_object_name("")
            if name.startswith(prefix):
                uids.add(name.removeprefix(prefix))
        if kind == "ResourceClaimTemplate":
            for domain in self.informers[_DOMAIN].store.items().values():
                spec = domain.get("spec") or {}
                template = ((spec.get("channel") or {}).get("resourceClaimTemplate") or {}).get(
                    "name"
                )
                dmeta = _meta(domain)
                if template == name and dmeta.get("namespace") == meta.get("namespace"):
                    uids.add(str(dmeta.get("uid") or ""))
        return frozenset(uids - {""})

    def _node_references(self) -> dict[str, set[str]]:
        refs: dict[str, set[str]] = {}
        for clique in self.informers["ComputeDomainClique"].store.items().values():
            for daemon in clique.get("daemons") or []:
                refs.setdefault(str(daemon.get("nodeName") or ""), set()).add(_label(clique))
        for pod in self.informers["Pod"].store.items().values():
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            refs.setdefault(node, set()).add(_label(pod))
        return refs

    # ------------------------------------------------------------------ reading
    def uids(self) -> set[str]:
        """Every domain UID the caches know: the domains, and those objects or node labels
        name (domains that are gone: their leftovers are to be removed)."""
        with self._lock:
            return {
                uid for seen in self._seen.values() for _, uids in seen.values() for uid in uids
            }

    def observe(self, uid: str) -> Observed:
        """What :func:`~.reconcile.plan_domain` needs to reconcile the domain ``uid``, from
        the caches: the domain (if it exists), its objects and any at names it wants (a
        conflict), its cliques and daemon pods, its labelled nodes, and which of the nodes
        its daemons name still exist."""
        domains = tuple(
            ComputeDomain.from_dict(d)
            for d in self.informers[_DOMAIN].store.items().values()
            if _meta(d).get("uid") == uid
        )
        wanted = self._wanted(domains)
        objects: list[OwnedObject] = []
        for kind in _OWNED_KINDS:
            for raw in self.informers[kind].store.items().values():
                obj = owned_object_from_api(kind, raw)
                if obj.domain_uid and (
                    obj.domain_uid == uid or (kind, obj.namespace, obj.name) in wanted
                ):
                    objects.append(obj)
        cliques = tuple(
            ComputeDomainClique.from_dict(c)
            for c in self.informers["ComputeDomainClique"].store.items().values()
            if _label(c) == uid
        )
        pods = tuple(
            daemon_pod_from_api(p)
            for p in self.informers["Pod"].store.items().values()
            if _label(p) == uid
        )
        nodes = self.informers["Node"].store
        labelled = {
            str(_meta(n).get("name")): uid for n in nodes.items().values() if _label(n) == uid
        }
        named = {p.node_name for p in pods} | {
            d.node_name for c in cliques for d in c.daemons or []
        }
        return Observed(
            domains=domains,
            objects=tuple(objects),
            cliques=cliques,
            pods=pods,
            node_labels=labelled,
            # Only the nodes this domain's daemons name: the plan asks about no others.
            node_names=frozenset(n for n in named if n and nodes.get(n) is not None),
        )

    def _wanted(self, domains: Iterable[ComputeDomain]) -> set[tuple[str, str, str]]:
        wanted: set[tuple[str, str, str]] = set()
        for domain in domains:
            name = daemon_object_name(domain.metadata.uid or "")
            wanted |= {
                ("DaemonSet", self.namespace, name),
                ("ResourceClaimTemplate", self.namespace, name),
            }
            try:
                template = workload_template_name(domain)
            except SpecError:
                continue  # the plan reports it
            wanted.add(("ResourceClaimTemplate", domain.metadata.namespace or "default", template))
        return wanted
