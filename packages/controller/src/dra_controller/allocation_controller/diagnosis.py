"""Live diagnosis: why each pod the scheduler could not place has unsatisfiable claims.

The same code as ``kubectl dra explain``: the pod's claims (``own_claims``) diagnosed
together on every node by the allocator's ``diagnose``, on the informers' snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass

from dra_allocator.cluster import Cluster
from dra_allocator.errors import AllocationError
from dra_allocator.explain import diagnose
from dra_allocator.explain_report import own_claims
from dra_allocator.features import Features
from dra_allocator.model import ClaimInfo
from dra_allocator.pool_cache import PoolCache
from dra_allocator.selectors import SelectorEngine
from dra_allocator.snapshot import Snapshot
from dra_allocator.state import StateCache
from dra_api_types import Pod

from .event_text import unsatisfiable_message


@dataclass(frozen=True, slots=True)
class Finding:
    """One claim of one unschedulable pod that no node can satisfy, and why."""

    pod: Pod
    claim: ClaimInfo
    message: str

    @property
    def pod_key(self) -> str:
        """``namespace/name`` of the pod."""
        return f"{self.pod.namespace}/{self.pod.metadata.name}"


def is_unschedulable(pod: Pod) -> bool:
    """Not bound, and ``PodScheduled=False`` with reason ``Unschedulable``."""
    if pod.spec.node_name:
        return False
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
        for c in pod.status.conditions or []
    )


def pod_uid(pod: Pod) -> str:
    """``metadata.uid``."""
    return pod.metadata.uid or ""


def diagnose_pod(cluster: Cluster, snapshot: Snapshot, pod: Pod) -> list[Finding]:
    """The pod's pending claims that fit on no node, with their Event message.

    A pod whose claims are not all created yet, or that fit somewhere (the scheduler
    failed for another reason), has no findings.
    """
    try:
        claims = own_claims(snapshot, pod, pod.namespace)
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


def make_cluster(
    snapshot: Snapshot,
    *,
    engine: SelectorEngine,
    features: Features,
    pool_cache: PoolCache | None = None,
    state_cache: StateCache | None = None,
) -> Cluster:
    """The allocator's cluster for one snapshot (every allocated claim holds its devices);
    ``pool_cache`` keeps the nodes' pools from the last snapshot while no slice changed,
    ``state_cache`` the allocated state, updated by the claims that changed."""
    return Cluster.from_snapshot(
        snapshot,
        engine=engine,
        features=features,
        pool_cache=pool_cache,
        state_cache=state_cache,
    )
