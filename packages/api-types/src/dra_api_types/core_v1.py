"""The parts of a ``core/v1`` Pod that DRA tools read: claims, placement and priority.

A :class:`Pod` models only what the allocator, ``kubectl dra`` and the allocation controller
read: ``metadata``; of ``spec`` the node name, node selector, required node affinity,
tolerations, priority (and its class name), the ``resourceClaims`` entries and each
container's ``resources``; of ``status`` the claim statuses, the scheduler's extended resource
claim and the conditions. Like every model here it is lenient: every other field of a Pod is
kept as read (``model_extra``) and written back by ``to_dict``. Field names and types are those
of the Kubernetes 1.37 OpenAPI schema (``io.k8s.api.core.v1.*``).

``Pod`` is deliberately not a registered kind (:func:`dra_api_types.parse_object` still returns
Pods as plain dicts): its field set is partial, so strict decoding (:mod:`dra_api_types.strict`)
must not judge a whole Pod by it. Strict decoding only walks :class:`PodResourceClaim` and
:class:`ResourceRequirements`, which are complete.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from pydantic import Field

from ._model import ApiModel, ApiObject
from .meta_v1 import NodeSelector, ObjectMeta

__all__ = [
    "CONTAINER_GROUPS",
    "Affinity",
    "Container",
    "ContainerExtendedResourceRequest",
    "ContainerResourceClaim",
    "NodeAffinity",
    "Pod",
    "PodCondition",
    "PodExtendedResourceClaimStatus",
    "PodResourceClaim",
    "PodResourceClaimStatus",
    "PodSpec",
    "PodStatus",
    "ResourceRequirements",
    "Toleration",
]

#: The container lists of a pod spec that may reference claims, in the API server's order.
CONTAINER_GROUPS: Final = ("initContainers", "containers")


class PodResourceClaim(ApiModel):
    """An entry of ``spec.resourceClaims``: a name for the pod's containers, and the claim
    (or the template a claim is made from) it stands for."""

    name: str | None = None
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class ContainerResourceClaim(ApiModel):
    """An entry of a container's ``resources.claims``: a pod claim name, optionally one of
    the claim's requests."""

    name: str | None = None
    request: str | None = None


class ResourceRequirements(ApiModel):
    """A container's ``resources``."""

    limits: dict[str, Any] | None = None
    requests: dict[str, Any] | None = None
    claims: list[ContainerResourceClaim] | None = None


class Container(ApiModel):
    """A container of a pod: its name and ``resources`` (every other field kept as read)."""

    name: str = ""
    resources: ResourceRequirements | None = None


class Toleration(ApiModel):
    """A pod toleration of node taints (``operator`` defaults to ``Equal``)."""

    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class NodeAffinity(ApiModel):
    """Node affinity: only the required part filters nodes (the preferred part is kept as read)."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None


class Affinity(ApiModel):
    """A pod's affinity; pod (anti-)affinity is kept as read."""

    node_affinity: NodeAffinity | None = None


class PodSpec(ApiModel):
    """The parts of a pod's spec that decide where it runs, when, and with which claims."""

    node_name: str | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    resource_claims: list[PodResourceClaim] | None = None
    init_containers: list[Container] | None = None
    containers: list[Container] = Field(default_factory=list)

    def container_groups(self) -> list[tuple[str, list[Container]]]:
        """The container lists that may reference claims, by API name, in
        :data:`CONTAINER_GROUPS` order (init containers first)."""
        return [
            ("initContainers", self.init_containers or []),
            ("containers", self.containers),
        ]


class PodResourceClaimStatus(ApiModel):
    """An entry of ``status.resourceClaimStatuses``: the claim made for a template entry."""

    name: str = ""
    resource_claim_name: str | None = None


class ContainerExtendedResourceRequest(ApiModel):
    """Which request of the scheduler's claim serves a container's extended resource."""

    container_name: str = ""
    request_name: str = ""
    resource_name: str = ""


class PodExtendedResourceClaimStatus(ApiModel):
    """``status.extendedResourceClaimStatus``: the claim the scheduler made for the pod's
    extended resources (KEP 5004) and the request serving each container's resource."""

    request_mappings: list[ContainerExtendedResourceRequest] = Field(default_factory=list)
    resource_claim_name: str = ""


class PodCondition(ApiModel):
    """A pod condition (``PodScheduled``, ``Ready``...)."""

    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    last_probe_time: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = None


class PodStatus(ApiModel):
    """The parts of a pod's status that DRA tools read."""

    conditions: list[PodCondition] | None = None
    resource_claim_statuses: list[PodResourceClaimStatus] | None = None
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None


class Pod(ApiObject):
    """A ``v1`` Pod (namespaced), with the fields DRA tools read typed; see the module doc."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Pod"
    PLURAL: ClassVar[str] = "pods"
    NAMESPACED: ClassVar[bool] = True

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    @property
    def namespace(self) -> str:
        """The pod's namespace, ``default`` when unset (as the API server defaults it)."""
        return self.metadata.namespace or "default"

    @property
    def name(self) -> str:
        """The pod's name (empty when unset)."""
        return self.metadata.name or ""

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"
