"""Typed models of the classic DRA objects Kubernetes removed, read only to migrate them.

These are *not* part of any API this package serves: ``resource.k8s.io`` ResourceClass with
``parametersRef``, NVIDIA's ``gpu.nvidia.com/v1`` NvidiaGPUConfig, ResourceClaims with
``resourceClassName``/``allocationMode`` and pod claim references with ``source``. They are
strict (an unknown field is an error naming it), because a field a migration does not know
cannot be carried over faithfully. They are kept out of :mod:`.codec`'s kind registry so that
loading manifests never silently turns them into anything else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import Field

from ._model import ApiModel, StrictApiModel
from .errors import ObjectRef, ValidationError
from .quantity import Quantity
from .resource_v1 import ObjectMeta

__all__ = [
    "LEGACY_GPU_CONFIG_GROUP",
    "REPLACED_BY",
    "LegacyClaimSource",
    "LegacyGpuConfigSpec",
    "LegacyParametersRef",
    "LegacyPodClaim",
    "LegacyResourceClaim",
    "LegacyResourceClaimSpec",
    "LegacyResourceClaimTemplate",
    "LegacyResourceClaimTemplateSpec",
    "LegacyResourceClass",
    "LegacySharing",
    "LegacyTimeSlicing",
    "NvidiaGpuConfig",
    "legacy_kind",
    "pod_claims_are_legacy",
]

RESOURCE_GROUP: Final = "resource.k8s.io"
LEGACY_GPU_CONFIG_GROUP: Final = "gpu.nvidia.com"

#: What replaced each legacy kind, for messages that send users to ``kubectl dra migrate``.
REPLACED_BY: Final = {
    "ResourceClass": "resource.k8s.io/v1 DeviceClass",
    "NvidiaGPUConfig": "DeviceClass CEL selectors plus an opaque resource.nvidia.com/v1beta1 "
    "GpuConfig",
    "ResourceClaim": "resource.k8s.io/v1 ResourceClaim with spec.devices.requests",
    "ResourceClaimTemplate": "resource.k8s.io/v1 ResourceClaimTemplate with "
    "spec.spec.devices.requests",
    "Pod": "spec.resourceClaims[].resourceClaimName / resourceClaimTemplateName and "
    "containers[].resources.claims",
}


class LegacyParametersRef(StrictApiModel):
    """``parametersRef`` of a classic ResourceClass or ResourceClaim."""

    api_group: str = ""
    kind: str = ""
    name: str = ""
    namespace: str | None = None


class LegacyResourceClass(StrictApiModel):
    """A classic ``resource.k8s.io`` ResourceClass (alpha/beta, removed in Kubernetes 1.31)."""

    api_version: str = ""
    kind: str = "ResourceClass"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    driver_name: str = ""
    parameters_ref: LegacyParametersRef | None = None
    suitable_nodes: dict[str, Any] | None = None
    structured_parameters: bool | None = None


class LegacyTimeSlicing(StrictApiModel):
    """``timeSlicingConfig`` of an NvidiaGPUConfig: ``interval`` is a duration or a name."""

    interval: str | None = None


class LegacySharing(StrictApiModel):
    """``sharing`` of an NvidiaGPUConfig."""

    strategy: str = ""
    time_slicing_config: LegacyTimeSlicing | None = None
    max_sharable_gpu: int | None = Field(default=None, alias="maxSharableGPU")


class LegacyGpuConfigSpec(StrictApiModel):
    """``spec`` of an NvidiaGPUConfig: what a GPU must have, and how it is shared.

    ``sharing.maxSharableGPU`` is also accepted as one dotted key, as the seed article
    writes it.
    """

    memory: Quantity | None = None
    compute_capability: str | float | int | None = None
    mig: bool | None = None
    sharing: LegacySharing | None = None
    dotted_max_sharable_gpu: int | None = Field(default=None, alias="sharing.maxSharableGPU")

    def max_sharable_gpu(self) -> int | None:
        """The number of pods that may share one GPU, wherever it was written."""
        if self.sharing is not None and self.sharing.max_sharable_gpu is not None:
            return self.sharing.max_sharable_gpu
        return self.dotted_max_sharable_gpu


class NvidiaGpuConfig(StrictApiModel):
    """NVIDIA's classic ``gpu.nvidia.com/v1`` NvidiaGPUConfig (class or claim parameters)."""

    api_version: str = ""
    kind: str = "NvidiaGPUConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LegacyGpuConfigSpec = Field(default_factory=LegacyGpuConfigSpec)


class LegacyResourceClaimSpec(StrictApiModel):
    """``spec`` of a classic ResourceClaim."""

    resource_class_name: str = ""
    allocation_mode: str | None = None
    parameters_ref: LegacyParametersRef | None = None


class LegacyResourceClaim(StrictApiModel):
    """A classic ResourceClaim (``spec.resourceClassName``)."""

    api_version: str = ""
    kind: str = "ResourceClaim"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LegacyResourceClaimSpec = Field(default_factory=LegacyResourceClaimSpec)
    status: dict[str, Any] | None = None


class LegacyResourceClaimTemplateSpec(StrictApiModel):
    """``spec`` of a classic ResourceClaimTemplate."""

    metadata: ObjectMeta | None = None
    spec: LegacyResourceClaimSpec = Field(default_factory=LegacyResourceClaimSpec)


class LegacyResourceClaimTemplate(StrictApiModel):
    """A classic ResourceClaimTemplate (``spec.spec.resourceClassName``)."""

    api_version: str = ""
    kind: str = "ResourceClaimTemplate"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LegacyResourceClaimTemplateSpec = Field(default_factory=LegacyResourceClaimTemplateSpec)


class LegacyClaimSource(StrictApiModel):
    """``source`` of a classic pod claim reference."""

    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class LegacyPodClaim(ApiModel):
    """A pod (or container) claim reference that may still carry a classic ``source``."""

    name: str = ""
    source: LegacyClaimSource | None = None


def _group(api_version: Any) -> str:
    return str(api_version or "").partition("/")[0]


def legacy_kind(data: Mapping[str, Any]) -> str | None:
    """The legacy kind of a raw object (``ResourceClass``, ``NvidiaGPUConfig``, ...), or None.

    A ResourceClaim(Template) is legacy when its spec uses ``resourceClassName``,
    ``allocationMode`` or ``parametersRef`` (fields of the classic API only); a Pod when
    one of its claim references has ``source``.
    """
    kind = data.get("kind")
    group = _group(data.get("apiVersion"))
    if kind == "ResourceClass" and group == RESOURCE_GROUP:
        return "ResourceClass"
    if kind == "NvidiaGPUConfig" and group == LEGACY_GPU_CONFIG_GROUP:
        return "NvidiaGPUConfig"
    spec = data.get("spec")
    if group == RESOURCE_GROUP and isinstance(spec, Mapping):
        if kind == "ResourceClaimTemplate":
            inner = spec.get("spec")
            spec = inner if isinstance(inner, Mapping) else {}
        if kind in ("ResourceClaim", "ResourceClaimTemplate") and any(
            key in spec for key in ("resourceClassName", "allocationMode", "parametersRef")
        ):
            return str(kind)
    if (
        kind == "Pod"
        and data.get("apiVersion") == "v1"
        and isinstance(spec, Mapping)
        and pod_claims_are_legacy(spec)
    ):
        return "Pod"
    return None


def pod_claims_are_legacy(pod_spec: Mapping[str, Any]) -> bool:
    """Whether a pod spec references claims the classic way (``source``, or per container)."""
    refs = pod_spec.get("resourceClaims")
    if isinstance(refs, list) and any(isinstance(r, Mapping) and "source" in r for r in refs):
        return True
    for group in ("initContainers", "containers"):
        for ctr in pod_spec.get(group) or []:
            if isinstance(ctr, Mapping) and "resourceClaims" in ctr:
                return True
    return False


def object_ref(data: Mapping[str, Any]) -> ObjectRef:
    """Kind, namespace and name of a raw object, for errors about it."""
    meta = data.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return ObjectRef(
        kind=str(data.get("kind") or ""),
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        api_version=str(data.get("apiVersion") or ""),
    )


def parse_legacy(
    data: Mapping[str, Any],
) -> LegacyResourceClass | NvidiaGpuConfig | LegacyResourceClaim | LegacyResourceClaimTemplate:
    """The typed model of a legacy object (see :func:`legacy_kind`).

    Raises :class:`ValidationError` naming the object and the field for anything the model
    does not know (such fields cannot be migrated faithfully), or if it is not legacy.
    """
    kind = legacy_kind(data)
    models: dict[str, type[StrictApiModel]] = {
        "ResourceClass": LegacyResourceClass,
        "NvidiaGPUConfig": NvidiaGpuConfig,
        "ResourceClaim": LegacyResourceClaim,
        "ResourceClaimTemplate": LegacyResourceClaimTemplate,
    }
    model = models.get(kind or "")
    if model is None:
        raise ValidationError("kind", "not a legacy object", object_ref=object_ref(data))
    parsed = model.from_dict(data)
    assert isinstance(
        parsed,
        LegacyResourceClass | NvidiaGpuConfig | LegacyResourceClaim | LegacyResourceClaimTemplate,
    )
    return parsed
