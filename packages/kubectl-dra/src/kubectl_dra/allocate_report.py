"""``kubectl dra allocate``: allocate claims offline and report in the v1 JSON shape.

Report shape (exactly)::

    {"claims": {"NS/NAME": {"allocated": true, "node": "...", "allocation": {...}}}}
    {"claims": {"NS/NAME": {"allocated": false, "reasons": ["..."]}}}

Pending pods whose containers request extended resources a DeviceClass maps
(``nvidia.com/gpu: 1``) are allocated first, one by one in input order, each with its own
claims and the special claim the scheduler would create (``NS/<pod>-extended-resources``);
they are reported under ``pods``::

    {"pods": {"NS/POD": {"allocated": true, "node": "...",
                         "extendedResourceClaimStatus": {"resourceClaimName": "...",
                                                         "requestMappings": [...]}}}}

Every other pod with unallocated claims (workloads' pods included) is scheduled the same
way, one pod at a time in scheduling order (higher ``spec.priority`` first, then input
order), its claims together on one node; a pod with claims made from ResourceClaimTemplates
is reported with the names the controller would record::

    {"pods": {"NS/POD": {"allocated": true, "node": "...",
                         "resourceClaimStatuses": [{"name": "gpu",
                                                    "resourceClaimName": "POD-gpu-xxxxx"}]}}}

The claims no pod of the input uses are then allocated together, as one pod's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_allocator.allocator import Allocated
from dra_allocator.cluster import Cluster
from dra_allocator.errors import AllocationError
from dra_allocator.explain import diagnose
from dra_allocator.explain_report import own_claims
from dra_allocator.features import Features
from dra_allocator.model import ClaimInfo
from dra_allocator.pod_extended import (
    PodAllocation,
    allocate_pod,
    diagnose_plans,
    pending_extended_pods,
)
from dra_allocator.pod_placement import PodPlacement, claim_not_on_node, pod_of_claims
from dra_allocator.pools import PoolID
from dra_allocator.reasons import reasons_of
from dra_allocator.selectors import SelectorEngine
from dra_allocator.snapshot import Snapshot
from dra_api_types import Pod

EXIT_ALLOCATED = 0
EXIT_UNSATISFIABLE = 1
EXIT_ERROR = 2
# resource.k8s.io FirstAvailableDeviceRequestMaxSize.
MAX_SUBREQUESTS = 8


@dataclass(frozen=True, slots=True)
class AllocateReport:
    """The report and the exit code that goes with it."""

    report: dict[str, Any]
    exit_code: int


def select_claims(snapshot: Snapshot, keys: Sequence[str]) -> list[ClaimInfo]:
    """The named claims (``NS/NAME``, or ``NAME`` in default), or every unallocated one."""
    if not keys:
        return [c for c in snapshot.claims if c.allocation is None]
    out = []
    for key in keys:
        full = key if "/" in key else f"default/{key}"
        claim = snapshot.claim(full)
        if claim is None:
            raise AllocationError(
                f"claim {full} not found in the input",
                object_ref=f"ResourceClaim {full}",
                field="--claim",
            )
        out.append(claim)
    return out


def run_allocate(
    snapshot: Snapshot,
    *,
    engine: SelectorEngine,
    features: Features,
    node: str | None = None,
    claim_keys: Sequence[str] = (),
    timeout_s: float = 10.0,
    pool_order: Sequence[PoolID] | None = None,
) -> AllocateReport:
    """Allocate the claims together (one pod's claims) and build the report.

    Raises ``AllocationError`` for input the scheduler would reject. ``timeout_s`` is the
    search deadline per node (the kube-scheduler's default filter timeout). ``pool_order``
    fixes the stable variant's pool order (upstream's is random; see ``Cluster``).
    """
    wanted = select_claims(snapshot, claim_keys)
    cluster = Cluster.from_snapshot(
        snapshot, engine=engine, features=features, timeout_s=timeout_s, pool_order=pool_order
    )
    claims_out: dict[str, Any] = {}
    pods_out: dict[str, Any] = {}
    if not claim_keys:
        taken = _allocate_pods(snapshot, cluster, node, claims_out, pods_out)
        wanted = [c for c in wanted if c.key not in taken]
    result = _allocate_claims(
        cluster,
        wanted,
        node,
        claims_out,
        pod=pod_of_claims(snapshot.pods, [c.key for c in wanted]),
        features=features,
    )
    # Pods scheduled before may have failed although the claims left over fit.
    failed = any(not e["allocated"] for e in (*claims_out.values(), *pods_out.values()))
    code = max(result.exit_code, EXIT_UNSATISFIABLE) if failed else result.exit_code
    if not pods_out:
        return AllocateReport(result.report, code)
    return AllocateReport({**result.report, "pods": pods_out}, code)


def _allocate_pods(
    snapshot: Snapshot,
    cluster: Cluster,
    node: str | None,
    claims_out: dict[str, Any],
    pods_out: dict[str, Any],
) -> set[str]:
    """Schedule the pods with extended resources or unallocated claims, one by one in
    scheduling order; returns the keys of the claims they used."""
    taken: set[str] = set()
    nodes = [node] if node else cluster.node_names()
    extended = {id(p) for p in pending_extended_pods(snapshot)}
    for pod in scheduling_order(snapshot.pods):
        own = own_claims(snapshot, pod, pod.namespace)
        if id(pod) not in extended:
            if any(c.allocation is None for c in own):
                taken.update(c.key for c in own)
                _allocate_pod_claims(cluster, pod, own, node, claims_out, pods_out)
            continue
        taken.update(c.key for c in own)
        outcome = allocate_pod(snapshot, cluster, pod, own, nodes)
        if outcome.node is not None:
            for claim, allocation in zip(outcome.claims, outcome.allocations, strict=True):
                claims_out[claim.key] = {
                    "allocated": True,
                    "node": outcome.node,
                    "allocation": allocation,
                }
        else:
            outcome.reasons = _pod_reasons(cluster, pod, own, outcome)
        pods_out[outcome.pod] = outcome.report()
    return taken


def scheduling_order(pods: Sequence[Pod]) -> list[Pod]:
    """Pods in the order the scheduler's queue pops them: higher ``spec.priority`` first
    (PrioritySort), then input order (standing in for creation time)."""
    return sorted(pods, key=lambda p: -(p.spec.priority or 0))


def _allocate_pod_claims(
    cluster: Cluster,
    pod: Pod,
    own: Sequence[ClaimInfo],
    node: str | None,
    claims_out: dict[str, Any],
    pods_out: dict[str, Any],
) -> None:
    """One pod's claims together (committed, so later pods see the devices held); a pod
    with claims made from templates gets its entry under ``pods``."""
    result = _allocate_claims(
        cluster,
        own,
        node,
        claims_out,
        pod=PodPlacement.from_pod(pod),
        features=cluster.features,
    )
    templated = [
        {"name": s.name, "resourceClaimName": s.resource_claim_name}
        for s in pod.status.resource_claim_statuses or []
    ]
    if not templated:
        return
    entry: dict[str, Any] = {"allocated": result.exit_code == EXIT_ALLOCATED}
    if entry["allocated"] and own:
        entry["node"] = claims_out[own[0].key]["node"]
    entry["resourceClaimStatuses"] = templated
    pods_out[f"{pod.namespace}/{pod.metadata.name}"] = entry


def _pod_reasons(
    cluster: Cluster, pod: Pod, own: Sequence[ClaimInfo], outcome: PodAllocation
) -> list[str]:
    lines = [f"node {p.node}: {reason}" for p in outcome.failed for reason in p.unfit]
    if not outcome.failed and not lines:
        lines.append("no nodes to try: pass Nodes, node-local ResourceSlices or --node NAME")
    pending = [c for c in own if c.allocation is None]
    for diag in diagnose_plans(cluster, pod, pending, outcome.failed):
        lines.extend(f"claim {diag.claim}: {line}" for line in reasons_of(diag))
    return lines


def _allocate_claims(
    cluster: Cluster,
    wanted: Sequence[ClaimInfo],
    node: str | None,
    claims_out: dict[str, Any],
    *,
    pod: PodPlacement | None,
    features: Features,
) -> AllocateReport:
    done = [c for c in wanted if c.allocation is not None]
    pending = [c for c in wanted if c.allocation is None]
    for claim in done:
        assert claim.allocation is not None
        claims_out[claim.key] = {
            "allocated": True,
            "node": _allocated_node(claim),
            "allocation": claim.allocation.to_dict(),
        }
    if not pending:
        return AllocateReport({"claims": claims_out}, EXIT_ALLOCATED)
    nodes = (
        [node]
        if node
        else [
            n
            for n in cluster.node_names()
            if claim_not_on_node(done, cluster.node(n)) is None
            and (pod is None or pod.rejects(cluster.node(n)) is None)
        ]
    )
    if not nodes:
        reason = (
            "no nodes to try: the input has no Node objects and no node-local "
            "ResourceSlices; pass --node NAME"
        )
        if pod is not None and cluster.node_names():
            rejected = {pod.rejects(cluster.node(n)) for n in cluster.node_names()} - {None}
            reason = f"{pod.ref}: no node passes the pod's own constraints: " + "; ".join(
                sorted(r for r in rejected if r is not None)
            )
        for claim in pending:
            claims_out[claim.key] = {"allocated": False, "reasons": [reason]}
        return AllocateReport({"claims": claims_out}, EXIT_UNSATISFIABLE)
    found = _allocate_on_nodes(cluster, pending, nodes, features=features)
    if found is not None:
        node_name, allocations = found
        cluster.commit(pending, Allocated(node=node_name, allocations=allocations))
        for claim, allocation in zip(pending, allocations, strict=True):
            claims_out[claim.key] = {"allocated": True, "node": node_name, "allocation": allocation}
        return AllocateReport({"claims": claims_out}, EXIT_ALLOCATED)
    diagnoses = diagnose(cluster, pending, nodes=nodes)
    for claim, diag in zip(pending, diagnoses, strict=True):
        claims_out[claim.key] = {"allocated": False, "reasons": reasons_of(diag)}
    return AllocateReport({"claims": claims_out}, EXIT_UNSATISFIABLE)


def _allocate_on_nodes(
    cluster: Cluster, pending: Sequence[ClaimInfo], nodes: Sequence[str], *, features: Features
) -> tuple[str, list[dict[str, Any]]] | None:
    if features.prioritized_list and any(r.first_available for c in pending for r in c.requests):
        # The scheduler scores the nodes that fit by the subrequests picked there and takes
        # the best; ties go to the first by name here (the scheduler draws one at random).
        best: tuple[int, str, list[dict[str, Any]]] | None = None
        for name in nodes:
            one = cluster.allocate(pending, node=name)
            if one.allocated is None:
                continue
            score = subrequest_score(pending, one.allocated.allocations)
            if best is None or score > best[0]:
                best = (score, name, one.allocated.allocations)
        return None if best is None else (best[1], best[2])
    if nodes == cluster.node_names():
        result = cluster.allocate(pending)
        if result.allocated is None:
            return None
        return result.allocated.node, result.allocated.allocations
    for name in nodes:
        one = cluster.allocate(pending, node=name)
        if one.allocated is not None:
            return one.allocated.node, one.allocated.allocations
    return None


def subrequest_score(claims: Sequence[ClaimInfo], allocations: Sequence[Mapping[str, Any]]) -> int:
    """The DynamicResources plugin's node score: earlier ``firstAvailable`` picks score higher.

    Each request with subrequests adds ``8 - i`` when its subrequest ``i`` was allocated (8 is
    the most subrequests a request may list).
    """
    score = 0
    for claim, allocation in zip(claims, allocations, strict=True):
        picked = {
            str(r.get("request", ""))
            for r in (allocation.get("devices") or {}).get("results") or []
            if "/" in str(r.get("request", ""))
        }
        for req in claim.requests:
            for i, sub in enumerate(req.first_available):
                if sub.full_name in picked:
                    score += MAX_SUBREQUESTS - i
    return score


def _allocated_node(claim: ClaimInfo) -> str:
    selector = None if claim.allocation is None else claim.allocation.node_selector
    for term in [] if selector is None else selector.node_selector_terms:
        for req in term.match_fields or []:
            if req.key == "metadata.name" and req.operator == "In" and len(req.values or []) == 1:
                return (req.values or [""])[0]
    return ""
