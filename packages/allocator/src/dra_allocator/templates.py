"""ResourceClaims from ResourceClaimTemplates, as the resourceclaim controller makes them
for a pod (pure).

For each ``spec.resourceClaims[]`` entry with ``resourceClaimTemplateName`` that the pod's
``status.resourceClaimStatuses`` does not resolve yet, the controller creates a claim from
the template's ``spec`` (labels and annotations from its ``metadata``), owned by the pod,
annotated ``resource.kubernetes.io/pod-claim-name``, with ``generateName``
``<pod>-<claim>-`` (both parts cut in proportion when longer than 57 characters) and
records the name in the pod's status. The API server appends 5 random characters; offline
they are derived from the pod and claim names (:func:`offline_claim_name`), so the same
input gives the same name. A claim the controller already made (owned by the pod, with the
annotation) is used as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from dra_api_types import (
    ObjectMeta,
    OwnerReference,
    Pod,
    PodResourceClaimStatus,
    ResourceClaim,
    ResourceClaimTemplate,
)

from .errors import AllocationError
from .workloads import stable_suffix

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
#: Leaves room for the 5 random characters (and a hyphen) in a 63-character name.
MAX_BASE_LEN = 57


def claim_generate_name(pod_name: str, claim_name: str) -> str:
    """The controller's ``generateName`` for the pod's claim (upstream's truncation)."""
    base = f"{pod_name}-{claim_name}-"
    if len(base) <= MAX_BASE_LEN:
        return base
    # As upstream: each part cut in proportion, so the claim's name is not lost.
    return (
        pod_name[: len(pod_name) * MAX_BASE_LEN // len(base)]
        + "-"
        + claim_name[: len(claim_name) * MAX_BASE_LEN // len(base)]
    )


def offline_claim_name(namespace: str, pod_name: str, claim_name: str) -> str:
    """The generated name with a deterministic suffix instead of the API server's random one."""
    seed = f"{namespace}/{pod_name}/{claim_name}"
    return claim_generate_name(pod_name, claim_name) + stable_suffix(seed)


@dataclass(slots=True)
class TemplateClaims:
    """The claims made from templates, the pods with their claim statuses, and a note each."""

    claims: list[ResourceClaim] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _made_for(claims: Sequence[ResourceClaim], pod: Pod, claim_name: str) -> str | None:
    """The name of a claim the controller already made for the pod's entry, if any."""
    meta = pod.metadata
    for claim in claims:
        cmeta = claim.metadata
        if (
            (cmeta.namespace or "default") == pod.namespace
            and (cmeta.annotations or {}).get(POD_CLAIM_ANNOTATION) == claim_name
            and any(
                o.kind == "Pod" and o.name == meta.name and (not meta.uid or o.uid == meta.uid)
                for o in cmeta.owner_references or []
            )
        ):
            return str(cmeta.name)
    return None


def claims_from_templates(
    pods: Sequence[Pod],
    templates: Mapping[str, ResourceClaimTemplate],
    claims: Sequence[ResourceClaim],
) -> TemplateClaims:
    """Make each pod's template claims (``templates`` keyed ``namespace/name``; ``claims``:
    the existing ResourceClaims). Pods without template entries to resolve are returned
    unchanged; the others as copies with their ``status.resourceClaimStatuses`` completed.

    Raises:
        AllocationError: a pod names a template that is not in ``templates``.
    """
    out = TemplateClaims()
    for pod in pods:
        namespace, pod_name = pod.namespace, pod.name
        statuses = list(pod.status.resource_claim_statuses or [])
        resolved = {s.name for s in statuses}
        added = False
        for i, ref in enumerate(pod.spec.resource_claims or []):
            template_name = ref.resource_claim_template_name
            if not template_name or ref.name in resolved:
                continue
            entry = ref.name or ""
            name = _made_for(claims, pod, entry)
            if name is None:
                template = templates.get(f"{namespace}/{template_name}")
                if template is None:
                    raise AllocationError(
                        f"ResourceClaimTemplate {namespace}/{template_name} is not in the input",
                        object_ref=f"Pod {namespace}/{pod_name}",
                        field=f"spec.resourceClaims[{i}].resourceClaimTemplateName",
                    )
                name = offline_claim_name(namespace, pod_name, entry)
                out.claims.append(_claim(template, pod, entry, name=name, namespace=namespace))
                out.notes.append(
                    f"ResourceClaim {namespace}/{name}: made from ResourceClaimTemplate "
                    f"{namespace}/{template_name} for Pod {namespace}/{pod_name} "
                    f"(spec.resourceClaims {entry}); the resourceclaim controller names it "
                    f"{claim_generate_name(pod_name, entry)}<5 random characters>, here "
                    "derived from the names"
                )
            statuses.append(PodResourceClaimStatus(name=entry, resource_claim_name=name))
            added = True
        if added:
            status = pod.status.model_copy(update={"resource_claim_statuses": statuses})
            pod = pod.model_copy(update={"status": status})
        out.pods.append(pod)
    return out


def _claim(
    template: ResourceClaimTemplate, pod: Pod, entry: str, *, name: str, namespace: str
) -> ResourceClaim:
    tmeta = template.spec.metadata
    owner = OwnerReference(api_version="v1", kind="Pod", name=pod.name, controller=True)
    if pod.metadata.uid:
        owner.uid = pod.metadata.uid
    return ResourceClaim(
        metadata=ObjectMeta(
            name=name,
            namespace=namespace,
            labels=dict(tmeta.labels or {}),
            annotations={**(tmeta.annotations or {}), POD_CLAIM_ANNOTATION: entry},
            owner_references=[owner],
        ),
        spec=template.spec.spec.copy_deep(),
    )
