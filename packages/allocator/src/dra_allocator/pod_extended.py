"""Allocating and explaining a pod's extended resources backed by DRA, node by node.

The scheduler's special claim differs per node (resources a device plugin serves there
are left out), so each node gets its own plan and, where DRA serves something, its own
claim, allocated together with the pod's own ResourceClaims.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_api_types import Pod

from .cluster import Cluster
from .explain import ClaimDiagnosis, diagnose
from .extended_resources import (
    ExtendedRequest,
    NodePlan,
    class_mapping,
    plan_node,
    pod_extended_requests,
    pod_ref,
    request_mappings,
    special_claim,
)
from .model import ClaimInfo, parse_claim
from .snapshot import Snapshot


@dataclass(slots=True)
class PodAllocation:
    """Where a pod with extended resources fits, or why it does not."""

    pod: str
    node: str | None = None
    plan: NodePlan | None = None
    claims: list[ClaimInfo] = field(default_factory=list)
    allocations: list[dict[str, Any]] = field(default_factory=list)
    failed: list[NodePlan] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        """The pod's entry in the ``allocate`` report."""
        if self.node is None or self.plan is None:
            return {"allocated": False, "reasons": self.reasons}
        out: dict[str, Any] = {"allocated": True, "node": self.node}
        if self.plan.dra:
            out["extendedResourceClaimStatus"] = {
                "resourceClaimName": self.claims[-1].name,
                "requestMappings": request_mappings(self.plan),
            }
        if self.plan.device_plugin:
            out["devicePlugin"] = self.plan.device_plugin
        return out


def has_dra_extended_resources(pod: Pod, mapping: Mapping[str, str]) -> bool:
    """Whether the pod requests an extended resource some DeviceClass maps."""
    return any(r.resource in mapping for r in pod_extended_requests(pod))


def pending_extended_pods(snapshot: Snapshot) -> list[Pod]:
    """Pods not bound to a node whose extended resources DRA may serve (input order)."""
    mapping = class_mapping(snapshot.classes)
    return [
        p for p in snapshot.pods if not p.spec.node_name and has_dra_extended_resources(p, mapping)
    ]


def _bound(snapshot: Snapshot, node: str) -> list[Pod]:
    return [p for p in snapshot.pods if p.spec.node_name == node]


def node_plans(
    snapshot: Snapshot, cluster: Cluster, pod: Pod, nodes: Sequence[str]
) -> tuple[list[ExtendedRequest], list[NodePlan]]:
    """The pod's extended requests and each node's plan for them."""
    mapping = class_mapping(snapshot.classes)
    requests = pod_extended_requests(pod)
    plans = [
        plan_node(pod, requests, mapping, cluster.node(n), bound_pods=_bound(snapshot, n))
        for n in nodes
    ]
    return requests, plans


def claims_for(pod: Pod, plan: NodePlan, own: Sequence[ClaimInfo]) -> list[ClaimInfo]:
    """The claims to allocate together on the plan's node: the pod's own, then the special one."""
    if not plan.dra:
        return list(own)
    return [*own, parse_claim(special_claim(pod, plan))]


def allocate_pod(
    snapshot: Snapshot,
    cluster: Cluster,
    pod: Pod,
    own: Sequence[ClaimInfo],
    nodes: Sequence[str],
) -> PodAllocation:
    """Allocate the pod's claims (special claim included) on the first node that fits.

    Commits the allocation, so the devices are held for pods allocated later.
    """
    result = PodAllocation(pod=pod_ref(pod))
    pending = [c for c in own if c.allocation is None]
    _, plans = node_plans(snapshot, cluster, pod, nodes)
    failed: list[NodePlan] = []
    for plan in plans:
        if plan.unfit:
            failed.append(plan)
            continue
        claims = claims_for(pod, plan, pending)
        if not claims:
            result.node, result.plan = plan.node, plan
            return result
        outcome = cluster.allocate(claims, node=plan.node)
        if outcome.allocated is not None:
            cluster.commit(claims, outcome.allocated)
            result.node, result.plan, result.claims = plan.node, plan, claims
            result.allocations = outcome.allocated.allocations
            return result
        failed.append(plan)
    result.failed = failed
    return result


def dra_groups(plans: Sequence[NodePlan]) -> list[list[NodePlan]]:
    """Plans that fit so far and use DRA, grouped by identical special claims."""
    groups: dict[tuple[tuple[str, str, int], ...], list[NodePlan]] = {}
    for plan in plans:
        if not plan.unfit:
            key = tuple((r.request_name, cls, r.count) for r, cls in plan.dra)
            groups.setdefault(key, []).append(plan)
    return list(groups.values())


def diagnose_plans(
    cluster: Cluster, pod: Pod, own: Sequence[ClaimInfo], plans: Sequence[NodePlan]
) -> list[ClaimDiagnosis]:
    """Diagnoses of the pod's claims (special one included) on the nodes DRA would serve."""
    out: list[ClaimDiagnosis] = []
    for group in dra_groups(plans):
        claims = claims_for(pod, group[0], own)
        if claims:
            out.extend(diagnose(cluster, claims, nodes=[p.node for p in group]))
    return out
