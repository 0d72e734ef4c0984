"""``kubectl dra explain``: which claims a target means, and the text report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from dra_api_types import Pod

from .cluster import Cluster
from .errors import AllocationError
from .explain import ClaimDiagnosis, diagnose
from .extended_resources import (
    class_mapping,
    existing_special_claim,
    pod_extended_requests,
    special_claim_name,
)
from .features import Features
from .gaps import request_summaries
from .model import ClaimInfo
from .pod_extended import diagnose_plans, node_plans
from .pod_placement import PodPlacement, claim_not_on_node
from .pods import pod_claim_names
from .selectors import SelectorEngine
from .snapshot import Snapshot

MAX_NODES_NAMED = 8


@dataclass(frozen=True, slots=True)
class Explanation:
    """The report's text, and whether the target fits on some node (``explain`` exits 1 if not)."""

    text: str
    fits: bool


@dataclass(frozen=True, slots=True)
class ExplainTarget:
    """What ``kubectl dra explain`` is asked about: a pod or a ResourceClaim, by namespace."""

    kind: Literal["pod", "resourceclaim"]
    name: str
    namespace: str

    @property
    def pod_name(self) -> str | None:
        """The pod's name for a pod target (the pod to fetch), None for a claim."""
        return self.name if self.kind == "pod" else None


def parse_target(target: str, namespace: str) -> ExplainTarget:
    """``pod/NAME`` or ``resourceclaim/NAME`` (also ``po``, ``resourceclaims``...)."""
    kind, sep, name = target.partition("/")
    if not sep or not name:
        raise AllocationError("target must be pod/NAME or resourceclaim/NAME", field="TARGET")
    kind = kind.lower()
    if kind in ("pod", "pods", "po"):
        return ExplainTarget("pod", name, namespace)
    if kind in ("resourceclaim", "resourceclaims", "claim"):
        return ExplainTarget("resourceclaim", name, namespace)
    raise AllocationError(
        f"unsupported kind {kind!r}: use pod/NAME or resourceclaim/NAME", field="TARGET"
    )


def own_claims(snapshot: Snapshot, pod: Pod, namespace: str) -> list[ClaimInfo]:
    """The ResourceClaims a pod references (and the scheduler's claim if it exists)."""
    name = pod.metadata.name
    names = pod_claim_names(pod)
    special = existing_special_claim(pod, [c.obj for c in snapshot.claims])
    if special:
        names.append(special)
    claims = []
    for claim_name in names:
        claim = snapshot.claim(f"{namespace}/{claim_name}")
        if claim is None:
            raise AllocationError(
                f"claim {claim_name} not found (not created yet?)",
                object_ref=f"Pod {namespace}/{name}",
                field="spec.resourceClaims",
            )
        claims.append(claim)
    return claims


def find_pod(snapshot: Snapshot, name: str, namespace: str) -> Pod:
    """The pod of the input, or an AllocationError."""
    pod = next(
        (p for p in snapshot.pods if p.metadata.name == name and p.namespace == namespace),
        None,
    )
    if pod is None:
        elsewhere = [p.namespace for p in snapshot.pods if p.metadata.name == name]
        raise AllocationError(not_found(elsewhere), object_ref=f"Pod {namespace}/{name}")
    return pod


def not_found(namespaces: Sequence[str]) -> str:
    """``not found`` and, when the name exists elsewhere, the namespaces that have it."""
    if not namespaces:
        return "not found"
    listed = ", ".join(sorted(set(namespaces)))
    return f"not found; that name exists in namespace(s) {listed} (use -n)"


def claim_namespaces(snapshot: Snapshot, name: str) -> list[str]:
    """The namespaces that have a ResourceClaim called ``name``."""
    return [c.key.partition("/")[0] for c in snapshot.claims if c.key.partition("/")[2] == name]


def target_pod(snapshot: Snapshot, target: ExplainTarget) -> Pod | None:
    """The target's pod (an AllocationError if it is not in the input); None for a claim."""
    if target.pod_name is None:
        return None
    return find_pod(snapshot, target.pod_name, target.namespace)


def target_claims(snapshot: Snapshot, target: ExplainTarget) -> list[ClaimInfo]:
    """The claims the explain target refers to."""
    name, namespace = target.name, target.namespace
    pod = target_pod(snapshot, target)
    if pod is None:
        claim = snapshot.claim(f"{namespace}/{name}")
        if claim is None:
            raise AllocationError(
                not_found(claim_namespaces(snapshot, name)),
                object_ref=f"ResourceClaim {namespace}/{name}",
            )
        return [claim]
    claims = own_claims(snapshot, pod, namespace)
    if not claims:
        raise AllocationError(
            "pod uses no ResourceClaims",
            object_ref=f"Pod {namespace}/{name}",
            field="spec.resourceClaims",
        )
    return claims


def explain(
    snapshot: Snapshot,
    claims: Sequence[ClaimInfo],
    *,
    engine: SelectorEngine,
    features: Features,
    node: str | None = None,
    placement: PodPlacement | None = None,
) -> Explanation:
    """The human-readable explanation for the claims (pending ones diagnosed together).

    ``placement`` (the pod's nodeSelector, affinity, tolerations) rules nodes out first, as
    the scheduler's node filters do, and so do the pod's claims already allocated for other
    nodes (a claim shared with a pod elsewhere); the claims are diagnosed on the nodes left.
    """
    cluster = Cluster.from_snapshot(snapshot, engine=engine, features=features)
    lines: list[str] = []
    for claim in claims:
        if claim.allocation is not None:
            picked = ", ".join(
                f"{r.request}: {r.driver}/{r.pool}/{r.device}"
                for r in claim.allocation.devices.results or []
            )
            lines.append(f"ResourceClaim {claim.key}: allocated ({picked or 'no devices'})")
    pending = [c for c in claims if c.allocation is None]
    if not pending:
        return Explanation(_text(lines), fits=True)
    nodes = [node] if node else cluster.node_names()
    if not nodes:
        lines.append(NO_NODES)
        return Explanation(_text(lines), fits=False)
    if placement is not None:
        done = [c for c in claims if c.allocation is not None]
        ruled_out = [
            (n, placement.rejects(cluster.node(n)) or claim_not_on_node(done, cluster.node(n)))
            for n in nodes
        ]
        ruled_out = [(n, why) for n, why in ruled_out if why is not None]
        if ruled_out:
            lines.append(f"{placement.ref}: its own constraints rule out {len(ruled_out)} node(s):")
            lines.extend(f"  does not fit on node {n}: {why}" for n, why in ruled_out)
            out = {n for n, _ in ruled_out}
            nodes = [n for n in nodes if n not in out]
    diagnoses = diagnose(cluster, pending, nodes=nodes)
    for diag in diagnoses:
        lines.extend(render(diag))
    return Explanation(_text(lines), fits=_fits_somewhere(diagnoses))


NO_NODES = (
    "no nodes known: the input has no Node objects and no node-local "
    "ResourceSlices (pass --node NAME)"
)


def _text(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


def _fits_somewhere(diagnoses: Sequence[ClaimDiagnosis]) -> bool:
    """Claims diagnosed together fit where every one of them is allocatable on one node."""
    if not diagnoses:
        return True
    fitting = [{d.node for d in diag.nodes if d.allocatable} for diag in diagnoses]
    return bool(set.intersection(*fitting))


def render(diag: ClaimDiagnosis) -> list[str]:
    """Text for one claim: where it fits (first node picked), and why not elsewhere."""
    lines = [f"ResourceClaim {diag.claim}: pending"]
    fits = [d for d in diag.nodes if d.allocatable]
    if fits:
        first = fits[0]
        others = f" (also fits on {len(fits) - 1} more node(s))" if len(fits) > 1 else ""
        lines.append(f"  fits on node {first.node}{others}; would pick:")
        lines.extend(f"    {p}" for p in first.picks)
    else:
        lines.append("  fits on no node")
        lines.extend(f"  {summary}" for summary in request_summaries(diag))
    for names, node_diag in diag.grouped():
        if node_diag.allocatable:
            continue
        shown = ", ".join(names[:MAX_NODES_NAMED])
        if len(names) > MAX_NODES_NAMED:
            shown += f" and {len(names) - MAX_NODES_NAMED} more"
        lines.append(f"  does not fit on {len(names)} node(s) ({shown}):")
        if node_diag.error:
            lines.append(f"    error: {node_diag.error}")
        lines.extend(
            f"    - {r.strip()}" if not r.startswith("  ") else f"        {r.strip()}"
            for r in node_diag.reasons
        )
    return lines


def needs_pod_explain(snapshot: Snapshot, pod: Pod) -> bool:
    """Whether a pod is pending with extended resources and no scheduler claim yet."""
    if pod.spec.node_name:
        return False
    if existing_special_claim(pod, [c.obj for c in snapshot.claims]):
        return False
    return bool(pod_extended_requests(pod))


def explain_pod(
    snapshot: Snapshot,
    pod: Pod,
    namespace: str,
    *,
    engine: SelectorEngine,
    features: Features,
    node: str | None = None,
) -> Explanation:
    """Why a pending pod with extended resources (``nvidia.com/gpu: N``) fits where it does.

    Per node: served by a device plugin (node allocatable), not servable at all, or by DRA
    through the claim the scheduler would create, diagnosed like any claim.
    """
    cluster = Cluster.from_snapshot(snapshot, engine=engine, features=features)
    name = pod.metadata.name
    mapping = class_mapping(snapshot.classes)
    lines = [f"Pod {namespace}/{name}: pending; extended resources:"]
    claim = special_claim_name(pod)
    for req in pod_extended_requests(pod):
        served = (
            f"DeviceClass {mapping[req.resource]}, request {req.request_name} of the claim "
            f"the scheduler creates ({namespace}/{claim}-<suffix>)"
            if req.resource in mapping
            else "no DeviceClass maps it: only a device plugin can serve it"
        )
        lines.append(f"  container {req.container}: {req.resource}: {req.count} -> {served}")
    nodes = [node] if node else cluster.node_names()
    if not nodes:
        lines.append(NO_NODES)
        return Explanation(_text(lines), fits=False)
    own = [c for c in own_claims(snapshot, pod, namespace) if c.allocation is None]
    _, plans = node_plans(snapshot, cluster, pod, nodes)
    for plan in plans:
        for reason in plan.unfit:
            lines.append(f"  does not fit on node {plan.node}: {reason}")
        if not plan.unfit and plan.device_plugin:
            lines.append(
                f"  node {plan.node}: {', '.join(plan.device_plugin)} served by the device "
                "plugin (node allocatable), not by DRA"
            )
        if not plan.unfit and not plan.dra and not own:
            lines.append(f"  fits on node {plan.node}")
    fits = any(not plan.unfit and not plan.dra and not own for plan in plans)
    diagnoses = diagnose_plans(cluster, pod, own, plans)
    for diag in diagnoses:
        lines.extend(render(diag))
    fits = fits or any(d.allocatable for diag in diagnoses for d in diag.nodes)
    return Explanation(_text(lines), fits=fits)
