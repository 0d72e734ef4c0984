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

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import AllocationError
from .workloads import stable_suffix

RawObject = Mapping[str, Any]
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

    claims: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _meta(obj: RawObject) -> RawObject:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _made_for(claims: Sequence[RawObject], pod: RawObject, claim_name: str) -> str | None:
    """The name of a claim the controller already made for the pod's entry, if any."""
    meta = _meta(pod)
    for claim in claims:
        cmeta = _meta(claim)
        owners = cmeta.get("ownerReferences") or []
        if (
            cmeta.get("namespace", "default") == meta.get("namespace", "default")
            and (cmeta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION) == claim_name
            and any(
                o.get("kind") == "Pod"
                and o.get("name") == meta.get("name")
                and (not meta.get("uid") or o.get("uid") == meta.get("uid"))
                for o in owners
                if isinstance(o, Mapping)
            )
        ):
            return str(cmeta.get("name"))
    return None


def claims_from_templates(
    pods: Sequence[RawObject],
    templates: Mapping[str, RawObject],
    claims: Sequence[RawObject],
) -> TemplateClaims:
    """Make each pod's template claims (``templates`` keyed ``namespace/name``, v1 JSON;
    ``claims``: the existing ResourceClaims, v1 JSON). Pods without template entries to
    resolve are returned unchanged.

    Raises:
        AllocationError: a pod names a template that is not in ``templates``.
    """
    out = TemplateClaims()
    for pod in pods:
        meta = _meta(pod)
        namespace = str(meta.get("namespace") or "default")
        pod_name = str(meta.get("name") or "")
        status = dict(pod.get("status") or {})
        statuses = list(status.get("resourceClaimStatuses") or [])
        resolved = {s.get("name") for s in statuses if isinstance(s, Mapping)}
        added = False
        entries = (pod.get("spec") or {}).get("resourceClaims") or []
        for i, ref in enumerate(entries):
            template_name = (
                ref.get("resourceClaimTemplateName") if isinstance(ref, Mapping) else None
            )
            if not template_name or ref.get("name") in resolved:
                continue
            entry = str(ref.get("name"))
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
            statuses.append({"name": entry, "resourceClaimName": name})
            added = True
        if added:
            pod = {**pod, "status": {**status, "resourceClaimStatuses": statuses}}
        out.pods.append(dict(pod))
    return out


def _claim(
    template: RawObject, pod: RawObject, entry: str, *, name: str, namespace: str
) -> dict[str, Any]:
    body = template.get("spec") or {}
    tmeta = body.get("metadata") or {}
    meta = _meta(pod)
    owner = {"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "controller": True}
    if meta.get("uid"):
        owner["uid"] = meta["uid"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(tmeta.get("labels") or {}),
            "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_ANNOTATION: entry},
            "ownerReferences": [owner],
        },
        "spec": copy.deepcopy(dict(body.get("spec") or {})),
    }
