"""Live diagnosis: why each pod the scheduler could not place has unsatisfiable claims.

The same code as ``kubectl dra explain``: the pod's claims (``own_claims``) diagnosed
together on every node by the allocator's ``diagnose``, on the informers' snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dra_allocator.cluster import Cluster
from dra_allocator.errors import AllocationError
from dra_allocator.explain import diagnose
from dra_allocator.explain_report import own_claims
from dra_allocator.features import Features
from dra_allocator.model import ClaimInfo
from dra_allocator.selectors import SelectorEngine
from dra_allocator.snapshot import Snapshot

from .event_text import unsatisfiable_message


@dataclass(frozen=True, slots=True)
class Finding:
    """One claim of one unschedulable pod that no node can satisfy, and why."""

    pod: Mapping[str, Any]
    claim: ClaimInfo
    message: str

    @property
    def pod_key(self) -> str:
        """``namespace/name`` of the pod."""
        meta = self.pod.get("metadata") or {}
        return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def is_unschedulable(pod: Mapping[str, Any]) -> bool:
    """Not bound, and ``PodScheduled=False`` with reason ``Unschedulable``."""
    if (pod.get("spec") or {}).get("nodeName"):
        return False
    return any(
        c.get("type") == "PodScheduled"
        and c.get("status") == "False"
        and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def pod_uid(pod: Mapping[str, Any]) -> str:
    """``metadata.uid``."""
    return str((pod.get("metadata") or {}).get("uid") or "")


def diagnose_pod(cluster: Cluster, snapshot: Snapshot, pod: Mapping[str, Any]) -> list[Finding]:
    """The pod's pending claims that fit on no node, with their Event message.

    A pod whose claims are not all created yet, or that fit somewhere (the scheduler
    failed for another reason), has no findings.
    """
    namespace = (pod.get("metadata") or {}).get("namespace") or "default"
    try:
        claims = own_claims(snapshot, pod, namespace)
    except AllocationError:
        return []
    pending = [c for c in claims if c.allocation is None]
    if not pending:
        return []
    findings = []
    for claim, diag in zip(pending, diagnose(cluster, pending), strict=True):
        message = unsatisfiable_message(diag)
        if message is not None:
            findings.append(Finding(pod=pod, claim=claim, message=message))
    return findings


def make_cluster(snapshot: Snapshot, *, engine: SelectorEngine, features: Features) -> Cluster:
    """The allocator's cluster for one snapshot (every allocated claim holds its devices)."""
    return Cluster.from_snapshot(snapshot, engine=engine, features=features)
