"""``kubectl dra validate``'s checks of names: a pod's claim references (as the API server's
Pod validation checks them), and what a claim names that this driver may not publish
(DeviceClasses, selector attributes and capacities: warnings, as the webhook gives them).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from dra_allocator.inputs import Document, object_label
from dra_api_types.core_v1 import CONTAINER_GROUPS
from dra_api_types.strict import pod_unknown_fields
from dra_api_types.validation import pod_claim_errors
from dra_cel.selector_names import class_name_warning, selector_warnings

from .findings import Finding

#: Where a claim kind keeps its DeviceClaim (``devices``).
_DEVICES = {
    "ResourceClaim": ("spec", "devices"),
    "ResourceClaimTemplate": ("spec", "spec", "devices"),
}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, Sequence) and not isinstance(value, str) else []


def uses_claims(spec: Mapping[str, Any]) -> bool:
    """Whether a pod spec declares or references any ResourceClaim (else nothing to check)."""
    if _list(spec.get("resourceClaims")):
        return True
    for group in CONTAINER_GROUPS:
        for container in _list(spec.get(group)):
            resources = container.get("resources") if isinstance(container, Mapping) else None
            if isinstance(resources, Mapping) and "claims" in resources:
                return True
    return False


def pod_findings(doc: Document, path: str, spec: Mapping[str, Any]) -> Iterator[Finding]:
    """Unknown fields in the claim references of the pod spec at ``path``, and what the
    API server's Pod validation says of them."""
    data = doc.data
    ref = object_label(data)
    strict = pod_unknown_fields(spec, path)
    meant = {error.meant for error in strict if error.meant}
    for error in strict:
        yield Finding(doc.location(error.path), ref, "", error.message)
    meta = data.get("metadata") if data.get("kind") == "Pod" else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    pod_name = name if isinstance(name, str) and name else None
    for exc in pod_claim_errors(spec, path, pod_name=pod_name):
        if any(exc.path in (m, m.rpartition(".")[0]) for m in meant):
            continue  # follows from the misspelt field
        yield Finding(doc.location(exc.path), ref, exc.path, exc.message)


def class_names(docs: Sequence[Document]) -> frozenset[str]:
    """The names of the DeviceClasses in the input."""
    names = set()
    for doc in docs:
        data = doc.data
        if isinstance(data, Mapping) and data.get("kind") == "DeviceClass":
            meta = data.get("metadata")
            if isinstance(meta, Mapping) and isinstance(meta.get("name"), str):
                names.add(meta["name"])
    return frozenset(names)


def name_warnings(
    doc: Document, data: Mapping[str, Any], classes: frozenset[str]
) -> Iterator[Finding]:
    """Warnings for a claim or claim template (v1 form) naming a DeviceClass that neither
    the input nor this driver has but this driver has one like it, or a ``gpu.nvidia.com``
    attribute or capacity the driver never publishes."""
    keys = _DEVICES.get(str(data.get("kind")))
    if keys is None:
        return
    devices: Any = data
    for key in keys:
        devices = devices.get(key) if isinstance(devices, Mapping) else None
    if not isinstance(devices, Mapping):
        return
    ref = object_label(data)
    prefix = ".".join(keys)
    for i, request in enumerate(_list(devices.get("requests"))):
        if not isinstance(request, Mapping):
            continue
        base = f"{prefix}.requests[{i}]"
        parts = [(f"{base}.exactly", request.get("exactly"))]
        parts += [
            (f"{base}.firstAvailable[{j}]", sub)
            for j, sub in enumerate(_list(request.get("firstAvailable")))
        ]
        for path, part in parts:
            name = part.get("deviceClassName") if isinstance(part, Mapping) else None
            if not isinstance(name, str) or name in classes:
                continue
            warning = class_name_warning(name)
            if warning is not None:
                where = f"{path}.deviceClassName"
                yield Finding(doc.location(where), ref, where, warning, warning=True)
    for warning in selector_warnings(devices, prefix):
        where, _, message = warning.partition(": ")
        yield Finding(doc.location(where), ref, where, message, warning=True)
