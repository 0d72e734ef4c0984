"""A ComputeDomain's status from its cliques and daemon pods (pure).

Nodes with NVLink fabric report through their clique's ComputeDomainClique; nodes without
(the daemon pod labelled with an empty clique ID) through the pod's readiness. The domain is
Ready once ``numNodes`` nodes are listed and none is NotReady.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dra_api_types import ComputeDomain, ComputeDomainClique, ComputeDomainNode, ComputeDomainStatus

from .names import CLIQUE_ID_POD_LABEL, COMPUTE_DOMAIN_LABEL

__all__ = ["DaemonPod", "aggregate_status", "daemon_pod_from_api", "status_changed"]

READY = "Ready"
NOT_READY = "NotReady"


@dataclass(frozen=True)
class DaemonPod:
    """What the controller needs of one domain daemon pod."""

    name: str
    domain_uid: str
    node_name: str
    ip_address: str
    #: None when the daemon has not labelled its pod yet; "" on a node without fabric.
    clique_id: str | None
    ready: bool


def daemon_pod_from_api(pod: Mapping[str, Any]) -> DaemonPod:
    """Read a core/v1 Pod of a domain daemon."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = pod.get("status") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return DaemonPod(
        name=str(meta.get("name", "")),
        domain_uid=str(labels.get(COMPUTE_DOMAIN_LABEL, "")),
        node_name=str((pod.get("spec") or {}).get("nodeName") or ""),
        ip_address=str(status.get("podIP") or ""),
        clique_id=labels.get(CLIQUE_ID_POD_LABEL),
        ready=ready,
    )


def aggregate_status(
    domain: ComputeDomain,
    cliques: Iterable[ComputeDomainClique],
    pods: Iterable[DaemonPod],
) -> ComputeDomainStatus:
    """The status ``domain`` should have, given its cliques and daemon pods.

    Clique entries whose daemon pod is gone are left out (the daemon died without
    deregistering); the controller prunes them from the clique as well.
    """
    uid = domain.metadata.uid or ""
    live = {p.node_name for p in pods if p.domain_uid == uid}
    nodes: dict[str, ComputeDomainNode] = {}
    for clique in cliques:
        if (clique.metadata.labels or {}).get(COMPUTE_DOMAIN_LABEL) != uid:
            continue
        for daemon in clique.daemons or []:
            if daemon.node_name not in live:
                continue
            nodes[daemon.node_name] = ComputeDomainNode(
                name=daemon.node_name,
                ip_address=daemon.ip_address,
                clique_id=daemon.clique_id,
                index=daemon.index,
                status=daemon.status or NOT_READY,
            )
    for pod in pods:
        if pod.domain_uid != uid or pod.clique_id != "" or not pod.node_name:
            continue
        nodes[pod.node_name] = ComputeDomainNode(
            name=pod.node_name,
            ip_address=pod.ip_address,
            clique_id="",
            index=0,
            status=READY if pod.ready else NOT_READY,
        )
    listed = [nodes[n] for n in sorted(nodes)]
    ready = len(listed) >= domain.spec.num_nodes and all(n.status == READY for n in listed)
    return ComputeDomainStatus(status=READY if ready else NOT_READY, nodes=listed or None)


def status_changed(domain: ComputeDomain, status: ComputeDomainStatus) -> bool:
    """Whether writing ``status`` would change the domain (no nodes and ``[]`` are equal)."""

    def key(s: ComputeDomainStatus) -> tuple[str, list[dict[str, Any]]]:
        return s.status, [n.to_dict() for n in s.nodes or []]

    return key(domain.status) != key(status)
