"""What the controller must do to make the cluster match its ComputeDomains (pure planning).

:func:`plan` takes one observation of the cluster and returns the actions that move it toward
the desired state; the controller's edge (:mod:`.controller`) applies them. Every action is
idempotent and the plan is recomputed from scratch each time, so a controller killed in the
middle of applying one plan finishes the job on its next pass.

Observation order matters for stale-object cleanup: nodes, DaemonSets, templates, cliques and
pods must be listed *before* ComputeDomains, so that an object labelled with a UID absent from
the domain list really belongs to a domain that is gone (not to one created meanwhile).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_api_types import ComputeDomain, ComputeDomainClique

from .errors import SpecError
from .manifests import (
    DaemonSettings,
    daemon_claim_template,
    daemon_set,
    workload_claim_template,
)
from .names import COMPUTE_DOMAIN_LABEL, FINALIZER
from .status import READY, DaemonPod, aggregate_status, status_changed

__all__ = [
    "Action",
    "AddFinalizer",
    "Create",
    "Delete",
    "Event",
    "Observed",
    "OwnedObject",
    "PruneClique",
    "RemoveFinalizer",
    "UnlabelNode",
    "WriteStatus",
    "owned_object_from_api",
    "plan",
    "plan_domain",
    "stale_uids",
]


@dataclass(frozen=True)
class OwnedObject:
    """An object the controller made for a domain (found by the domain label)."""

    kind: str
    namespace: str
    name: str
    domain_uid: str
    finalizers: tuple[str, ...] = ()
    deleting: bool = False


def owned_object_from_api(kind: str, obj: Mapping[str, Any]) -> OwnedObject:
    """Read the metadata of a DaemonSet, ResourceClaimTemplate or ComputeDomainClique."""
    meta = obj.get("metadata") or {}
    return OwnedObject(
        kind=kind,
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        domain_uid=str((meta.get("labels") or {}).get(COMPUTE_DOMAIN_LABEL, "")),
        finalizers=tuple(meta.get("finalizers") or ()),
        deleting=bool(meta.get("deletionTimestamp")),
    )


@dataclass(frozen=True)
class Observed:
    """One look at the cluster, as :func:`plan` needs it."""

    domains: tuple[ComputeDomain, ...]
    objects: tuple[OwnedObject, ...] = ()
    cliques: tuple[ComputeDomainClique, ...] = ()
    pods: tuple[DaemonPod, ...] = ()
    #: node name -> the domain UID of its label
    node_labels: Mapping[str, str] = field(default_factory=dict)
    #: every node of the cluster; None: not listed (no daemon counts as on a vanished node)
    node_names: frozenset[str] | None = None

    def on_existing_node(self, pod: DaemonPod) -> bool:
        """Whether ``pod`` is unscheduled or on a node that still exists."""
        return self.node_names is None or not pod.node_name or pod.node_name in self.node_names


@dataclass(frozen=True)
class Create:
    """Create ``body`` (a 409 means it is already there: fine)."""

    kind: str
    body: dict[str, Any]


@dataclass(frozen=True)
class Delete:
    """Delete an object (a 404 is fine)."""

    kind: str
    namespace: str
    name: str


@dataclass(frozen=True)
class AddFinalizer:
    """Add the controller's finalizer to a ComputeDomain."""

    namespace: str
    name: str


@dataclass(frozen=True)
class RemoveFinalizer:
    """Remove the controller's finalizer from an object, so its deletion can finish."""

    kind: str
    namespace: str
    name: str


@dataclass(frozen=True)
class UnlabelNode:
    """Remove the domain label from a node."""

    node: str
    domain_uid: str


@dataclass(frozen=True)
class WriteStatus:
    """Write a ComputeDomain's status subresource."""

    namespace: str
    name: str
    status: dict[str, Any]


@dataclass(frozen=True)
class PruneClique:
    """Drop the entries of daemons whose pod is gone (optimistic: at ``resource_version``)."""

    namespace: str
    name: str
    resource_version: str
    keep: tuple[dict[str, Any], ...]
    dropped: tuple[str, ...]


@dataclass(frozen=True)
class Event:
    """A core/v1 Event about a ComputeDomain."""

    namespace: str
    name: str
    uid: str
    type: str
    reason: str
    message: str


Action = (
    Create
    | Delete
    | AddFinalizer
    | RemoveFinalizer
    | UnlabelNode
    | WriteStatus
    | PruneClique
    | Event
)


def _event(domain: ComputeDomain, type_: str, reason: str, message: str) -> Event:
    return Event(
        namespace=domain.metadata.namespace or "",
        name=domain.metadata.name or "",
        uid=domain.metadata.uid or "",
        type=type_,
        reason=reason,
        message=message,
    )


def _teardown(obj: OwnedObject) -> list[Action]:
    actions: list[Action] = []
    if FINALIZER in obj.finalizers:
        actions.append(RemoveFinalizer(obj.kind, obj.namespace, obj.name))
    if not obj.deleting:
        actions.append(Delete(obj.kind, obj.namespace, obj.name))
    return actions


def _delete_domain(domain: ComputeDomain, observed: Observed) -> list[Action]:
    uid = domain.metadata.uid or ""
    mine = [o for o in observed.objects if o.domain_uid == uid]
    nodes = sorted(n for n, u in observed.node_labels.items() if u == uid)
    actions: list[Action] = []
    for obj in mine:
        actions += _teardown(obj)
    actions += [UnlabelNode(n, uid) for n in nodes]
    if not mine and not nodes:
        if FINALIZER in (domain.metadata.finalizers or []):
            actions.append(
                _event(domain, "Normal", "Deleted", "all objects of the domain are gone")
            )
            actions.append(
                RemoveFinalizer(
                    "ComputeDomain", domain.metadata.namespace or "", domain.metadata.name or ""
                )
            )
    elif FINALIZER in (domain.metadata.finalizers or []):
        what = ", ".join(
            [f"{o.kind} {o.namespace}/{o.name}" for o in mine]
            + [f"label of node {n}" for n in nodes]
        )
        actions.append(_event(domain, "Normal", "Deleting", f"removing {what}"))
    return actions


def _ensure(domain: ComputeDomain, observed: Observed, settings: DaemonSettings) -> list[Action]:
    ns = domain.metadata.namespace or ""
    name = domain.metadata.name or ""
    uid = domain.metadata.uid or ""
    actions: list[Action] = []
    if FINALIZER not in (domain.metadata.finalizers or []):
        actions.append(AddFinalizer(ns, name))
    try:
        wanted = [
            (
                "ResourceClaimTemplate",
                workload_claim_template(domain, host_managed_imex=settings.host_managed_imex),
            )
        ]
        if not settings.host_managed_imex:
            wanted[:0] = [
                ("DaemonSet", daemon_set(domain, settings)),
                ("ResourceClaimTemplate", daemon_claim_template(domain, settings)),
            ]
    except SpecError as exc:
        return [*actions, _event(domain, "Warning", "InvalidSpec", str(exc))]
    existing = {(o.kind, o.namespace, o.name): o for o in observed.objects}
    conflict = False
    for kind, body in wanted:
        meta = body["metadata"]
        have = existing.get((kind, meta["namespace"], meta["name"]))
        if have is None:
            actions.append(Create(kind, body))
            actions.append(
                _event(domain, "Normal", f"Created{kind}", f"{meta['namespace']}/{meta['name']}")
            )
        elif have.domain_uid != uid:
            conflict = True
            actions.append(
                _event(
                    domain,
                    "Warning",
                    "NameConflict",
                    f"{kind} {meta['namespace']}/{meta['name']} exists and does not belong to "
                    f"this domain (label {COMPUTE_DOMAIN_LABEL}={have.domain_uid!r})",
                )
            )
    mine_cliques = [
        c for c in observed.cliques if (c.metadata.labels or {}).get(COMPUTE_DOMAIN_LABEL) == uid
    ]
    # A daemon pod on a deleted node is gone, even before the pod GC removes it.
    pods = [p for p in observed.pods if observed.on_existing_node(p)]
    live = {p.node_name for p in pods if p.domain_uid == uid}
    left = sorted(
        {p.node_name for p in observed.pods if p.domain_uid == uid and p not in pods}
        | {
            d.node_name
            for c in mine_cliques
            for d in c.daemons or []
            if observed.node_names is not None and d.node_name not in observed.node_names
        }
    )
    for node in left:
        actions.append(
            _event(domain, "Warning", "NodeLeft", f"node {node} is gone; its daemon is dropped")
        )
    for clique in mine_cliques:
        daemons = clique.daemons or []
        dropped = tuple(d.node_name for d in daemons if d.node_name not in live)
        if dropped:
            actions.append(
                PruneClique(
                    namespace=clique.metadata.namespace or "",
                    name=clique.metadata.name or "",
                    resource_version=clique.metadata.resource_version or "",
                    keep=tuple(d.to_dict() for d in daemons if d.node_name in live),
                    dropped=dropped,
                )
            )
    status = aggregate_status(domain, mine_cliques, pods)
    if settings.host_managed_imex:
        # No daemons report: the hosts' IMEX is outside the driver's view (each channel
        # prepare checks its node's), so the domain is Ready with no nodes listed.
        status.status, status.nodes = READY, []
    if conflict:
        status.status = "NotReady"
    if status_changed(domain, status):
        actions.append(WriteStatus(ns, name, status.to_dict()))
        was_ready = domain.status.status == READY
        if status.status == READY and not was_ready:
            nodes = ", ".join(n.name for n in status.nodes or [])
            actions.append(_event(domain, "Normal", "Ready", f"nodes: {nodes or 'none'}"))
        elif status.status != READY and was_ready:
            bad = ", ".join(n.name for n in status.nodes or [] if n.status != READY)
            actions.append(
                _event(domain, "Warning", "NotReady", f"not ready: {bad or 'too few nodes'}")
            )
    return actions


def plan(observed: Observed, settings: DaemonSettings) -> list[Action]:
    """The actions that bring the cluster to the state ``observed.domains`` ask for.

    Objects and node labels of domains that no longer exist are removed too (the periodic
    cleanup of stale objects: e.g. a domain force-deleted while the controller was down).
    """
    actions: list[Action] = []
    uids = {d.metadata.uid for d in observed.domains}
    for domain in observed.domains:
        if domain.metadata.deletion_timestamp:
            actions += _delete_domain(domain, observed)
        else:
            actions += _ensure(domain, observed, settings)
    for obj in observed.objects:
        if obj.domain_uid not in uids:
            actions += _teardown(obj)
    for node, uid in sorted(observed.node_labels.items()):
        if uid not in uids:
            actions.append(UnlabelNode(node, uid))
    return actions


def plan_domain(observed: Observed, settings: DaemonSettings, uid: str) -> list[Action]:
    """The actions :func:`plan` takes for the one domain ``uid`` (a controller that
    reconciles domain by domain): ensure or delete it when it is in ``observed.domains``,
    else remove the objects and node labels it left behind.

    Objects of other domains in ``observed`` are only read (a name another domain holds is a
    conflict), never acted on: they are their own domain's business.
    """
    for domain in observed.domains:
        if domain.metadata.uid == uid:
            if domain.metadata.deletion_timestamp:
                return _delete_domain(domain, observed)
            return _ensure(domain, observed, settings)
    actions: list[Action] = []
    for obj in observed.objects:
        if obj.domain_uid == uid:
            actions += _teardown(obj)
    for node, label in sorted(observed.node_labels.items()):
        if label == uid:
            actions.append(UnlabelNode(node, uid))
    return actions


def stale_uids(observed: Observed) -> Iterable[str]:
    """UIDs of domains that are gone but still own objects or node labels (for logs)."""
    uids = {d.metadata.uid for d in observed.domains}
    found = {o.domain_uid for o in observed.objects} | set(observed.node_labels.values())
    return sorted(u for u in found if u not in uids)
