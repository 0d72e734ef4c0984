"""Where the pod whose claims are allocated may run: the scheduler's node filters for it.

Besides DRA, the kube-scheduler only considers nodes that pass the pod's ``nodeName``,
``nodeSelector``, required node affinity (NodeAffinity plugin) and whose NoSchedule /
NoExecute taints the pod tolerates (TaintToleration plugin); and DynamicResources only those
where the pod's already allocated claims are available. Pure logic over the pod's JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .model import ClaimInfo
from .nodes import NodeInfo, NodeTaint, node_selector_matches

RawObject = Mapping[str, Any]
_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """The node constraints of one pod."""

    ref: str
    node_name: str
    node_selector: Mapping[str, str]
    required_affinity: RawObject | None
    tolerations: Sequence[RawObject]

    @classmethod
    def from_pod(cls, pod: RawObject) -> PodPlacement:
        """Read the constraints from a v1 Pod object."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        return cls(
            ref=f"Pod {meta.get('namespace') or 'default'}/{meta.get('name', '')}",
            node_name=str(spec.get("nodeName") or ""),
            node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
            required_affinity=affinity if isinstance(affinity, Mapping) else None,
            tolerations=[t for t in spec.get("tolerations") or [] if isinstance(t, Mapping)],
        )

    def rejects(self, node: NodeInfo) -> str | None:
        """Why the pod cannot run on the node (the scheduler's wording), or None."""
        if self.node_name and self.node_name != node.name:
            return "node(s) didn't match the requested node name"
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return "node(s) didn't match Pod's node affinity/selector"
        if self.required_affinity is not None and not node_selector_matches(
            self.required_affinity, node, where=f"{self.ref}: spec.affinity.nodeAffinity"
        ):
            return "node(s) didn't match Pod's node affinity/selector"
        for taint in node.taints:
            if taint.effect in _FILTERED_EFFECTS and not self._tolerates(taint):
                return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"
        return None

    def _tolerates(self, taint: NodeTaint) -> bool:
        for tol in self.tolerations:
            effect = str(tol.get("effect") or "")
            if effect and effect != taint.effect:
                continue
            key = str(tol.get("key") or "")
            operator = str(tol.get("operator") or "Equal")
            if operator == "Exists":
                if not key or key == taint.key:
                    return True
            elif key == taint.key and str(tol.get("value") or "") == taint.value:
                return True
        return False


def pod_of_claims(pods: Sequence[RawObject], claim_keys: Sequence[str]) -> PodPlacement | None:
    """The pod (among ``pods``) that references one of the claims by name, if any."""
    wanted = set(claim_keys)
    for pod in pods:
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
            name = ref.get("resourceClaimName") if isinstance(ref, Mapping) else None
            if name and f"{namespace}/{name}" in wanted:
                return PodPlacement.from_pod(pod)
    return None


def claim_not_on_node(claims: Sequence[ClaimInfo], node: NodeInfo) -> str | None:
    """Why one of the pod's allocated claims keeps it off the node (the scheduler's wording,
    naming the claim), or None: the allocation's nodeSelector does not match the node."""
    for claim in claims:
        selector = (claim.allocation or {}).get("nodeSelector")
        if selector and not node_selector_matches(
            selector, node, where=f"{claim.ref}: status.allocation"
        ):
            return (
                f"resourceclaim not available on the node ({claim.key} is allocated for "
                "other nodes)"
            )
    return None
