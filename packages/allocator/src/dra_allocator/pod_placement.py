"""Where the pod whose claims are allocated may run: the scheduler's node filters for it.

Besides DRA, the kube-scheduler only considers nodes that pass the pod's ``nodeName``,
``nodeSelector``, required node affinity (NodeAffinity plugin) and whose NoSchedule /
NoExecute taints the pod tolerates (TaintToleration plugin); and DynamicResources only those
where the pod's already allocated claims are available. Pure logic over the typed Pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dra_api_types import NodeSelector, Pod, Toleration

from .model import ClaimInfo
from .nodes import NodeInfo, NodeTaint, node_selector_matches

_FILTERED_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """The node constraints of one pod."""

    ref: str
    node_name: str
    node_selector: Mapping[str, str]
    required_affinity: NodeSelector | None
    tolerations: Sequence[Toleration]

    @classmethod
    def from_pod(cls, pod: Pod) -> PodPlacement:
        """Read the constraints from a v1 Pod."""
        spec = pod.spec
        node_affinity = spec.affinity.node_affinity if spec.affinity is not None else None
        return cls(
            ref=f"Pod {pod.key}",
            node_name=spec.node_name or "",
            node_selector=dict(spec.node_selector or {}),
            required_affinity=(
                None
                if node_affinity is None
                else node_affinity.required_during_scheduling_ignored_during_execution
            ),
            tolerations=list(spec.tolerations or []),
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
            effect = tol.effect or ""
            if effect and effect != taint.effect:
                continue
            key = tol.key or ""
            operator = tol.operator or "Equal"
            if operator == "Exists":
                if not key or key == taint.key:
                    return True
            elif key == taint.key and (tol.value or "") == taint.value:
                return True
        return False


def pod_of_claims(pods: Sequence[Pod], claim_keys: Sequence[str]) -> PodPlacement | None:
    """The pod (among ``pods``) that references one of the claims by name, if any."""
    wanted = set(claim_keys)
    for pod in pods:
        for ref in pod.spec.resource_claims or []:
            name = ref.resource_claim_name
            if name and f"{pod.namespace}/{name}" in wanted:
                return PodPlacement.from_pod(pod)
    return None


def claim_not_on_node(claims: Sequence[ClaimInfo], node: NodeInfo) -> str | None:
    """Why one of the pod's allocated claims keeps it off the node (the scheduler's wording,
    naming the claim), or None: the allocation's nodeSelector does not match the node."""
    for claim in claims:
        selector = None if claim.allocation is None else claim.allocation.node_selector
        if selector is not None and not node_selector_matches(
            selector, node, where=f"{claim.ref}: status.allocation"
        ):
            return (
                f"resourceclaim not available on the node ({claim.key} is allocated for "
                "other nodes)"
            )
    return None
