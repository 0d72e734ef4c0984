"""The kube-apiserver's checks of a pod spec's claim references (``validatePodResourceClaims``
and ``validateResourceClaimNames`` of ``pkg/apis/core/validation``).

Every ``spec.resourceClaims`` entry needs a unique DNS-label name and exactly one of
``resourceClaimName`` and ``resourceClaimTemplateName`` (DNS subdomains); with a template,
the claim the resourceclaim controller makes is named ``<pod>-<name>``, which must be a
valid name too. Every container's ``resources.claims`` entry must name one of the pod's
claims, once per request. Pure logic over decoded JSON; a Pod's own name is only known for
Pods (a pod template's pods get theirs later).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..core_v1 import CONTAINER_GROUPS
from ..errors import ValidationError
from ..names import dns_label_errors, dns_subdomain_errors
from ._common import _Errors

__all__ = ["pod_claim_errors"]


def pod_claim_errors(
    spec: Mapping[str, Any], path: str, *, pod_name: str | None = None
) -> list[ValidationError]:
    """Every claim reference problem of the pod spec ``spec`` found at field path ``path``
    (``spec`` of a Pod, ``spec.template.spec`` of a Deployment); ``pod_name`` is the Pod's
    name (None for pod templates)."""
    errors = _Errors()
    names = _pod_claims(errors, spec.get("resourceClaims"), f"{path}.resourceClaims", pod_name)
    for group in CONTAINER_GROUPS:
        for i, container in _entries(spec.get(group)):
            resources = container.get("resources")
            claims = resources.get("claims") if isinstance(resources, Mapping) else None
            where = f"{path}.{group}[{i}].resources.claims"
            _container_claims(errors, claims, where, names)
    return [ValidationError(where, message) for where, message in errors.items]


def _entries(value: Any) -> list[tuple[int, Mapping[str, Any]]]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        return []
    return [(i, item) for i, item in enumerate(value) if isinstance(item, Mapping)]


def _invalid(errors: _Errors, path: str, value: str, details: list[str]) -> None:
    for detail in details:
        errors.add(path, f"Invalid value: {json.dumps(value)}: {detail}")


def _pod_claims(errors: _Errors, claims: Any, path: str, pod_name: str | None) -> set[str]:
    names: set[str] = set()
    for i, claim in _entries(claims):
        where = f"{path}[{i}]"
        name = claim.get("name")
        if not name:
            errors.required(f"{where}.name")
        elif name in names:
            errors.add(f"{where}.name", f"Duplicate value: {json.dumps(name)}")
        else:
            name = str(name)
            label = dns_label_errors(name)
            _invalid(errors, f"{where}.name", name, label)
            if not label and pod_name and claim.get("resourceClaimTemplateName") is not None:
                final = f"{pod_name}-{name}"
                details = [f"final ResourceClaim name: {d}" for d in dns_subdomain_errors(final)]
                _invalid(errors, f"{where}.name", final, details)
            names.add(name)
        claim_name = claim.get("resourceClaimName")
        template_name = claim.get("resourceClaimTemplateName")
        shown = json.dumps(dict(claim), sort_keys=True)
        if claim_name is not None and template_name is not None:
            errors.add(
                where,
                f"Invalid value: {shown}: at most one of `resourceClaimName` or "
                "`resourceClaimTemplateName` may be specified",
            )
        if claim_name is None and template_name is None:
            errors.add(
                where,
                f"Invalid value: {shown}: must specify one of: `resourceClaimName`, "
                "`resourceClaimTemplateName`",
            )
        for field, value in (
            ("resourceClaimName", claim_name),
            ("resourceClaimTemplateName", template_name),
        ):
            if value is not None:
                _invalid(errors, f"{where}.{field}", str(value), dns_subdomain_errors(str(value)))
    return names


def _container_claims(errors: _Errors, claims: Any, path: str, pod_claims: set[str]) -> None:
    seen: set[str] = set()
    for i, claim in _entries(claims):
        where = f"{path}[{i}]"
        name = claim.get("name")
        if not name:
            errors.required(where)
            continue
        name = str(name)
        key = name
        request = claim.get("request")
        if request:
            _invalid(errors, f"{where}.request", str(request), dns_label_errors(str(request)))
            key = f"{name}/{request}"
        if key in seen:
            errors.add(where, f"Duplicate value: {json.dumps(key)}")
        seen.add(key)
        if name not in pod_claims:
            listed = ": " + ", ".join(sorted(pod_claims)) if pod_claims else " which is empty"
            errors.add(
                where,
                f"Not found: {json.dumps(name)}: must be one of the names in "
                f"pod.spec.resourceClaims{listed}",
            )
