"""The parts of ``core/v1`` Pods that reference ResourceClaims (what DRA tools read of a Pod).

Only these parts are modelled: the Pod's ``spec.resourceClaims`` entries and a container's
``resources`` (with ``resources.claims``). Their fields are those of the Kubernetes 1.37
OpenAPI schema (``io.k8s.api.core.v1.PodResourceClaim``, ``ResourceRequirements``,
``ResourceClaim``), so strict decoding (:mod:`dra_api_types.strict`) can name a typo in them.
"""

from __future__ import annotations

from typing import Any, Final

from ._model import ApiModel

__all__ = [
    "CONTAINER_GROUPS",
    "ContainerResourceClaim",
    "PodResourceClaim",
    "ResourceRequirements",
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
