"""Pods and pod templates: classic claim references, and device-plugin extended resources.

Works on a deep copy of the workload; every function returns the notes of what it did.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from dra_allocator.errors import AllocationError
from dra_allocator.extended_resources import IMPLICIT_PREFIX, pod_extended_requests
from dra_allocator.pods import read_pod
from dra_api_types import GPU_DRIVER
from dra_api_types.core_v1 import CONTAINER_GROUPS
from dra_api_types.errors import ValidationError
from dra_api_types.legacy import LegacyPodClaim

from .errors import MigrationError

#: Where each workload kind keeps its pod spec.
POD_SPEC_PATHS: Final = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "PodTemplate": ("template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
#: The chart's DeviceClass gpu.nvidia.com sets extendedResourceName: nvidia.com/gpu.
CHART_EXTENDED_RESOURCES: Final = {"nvidia.com/gpu": GPU_DRIVER}
EXTENDED_CLAIM: Final = "extended-resources"


def pod_spec_of(obj: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(field path, pod spec) of a Pod or workload (the spec is the object's own dict)."""
    keys = POD_SPEC_PATHS.get(str(obj.get("kind")))
    if keys is None or not str(obj.get("apiVersion", "")).startswith(("v1", "apps/", "batch/")):
        return None
    node: Any = obj
    for key in keys:
        node = node.get(key) if isinstance(node, Mapping) else None
    return (".".join(keys), node) if isinstance(node, dict) else None


def _claim_ref(raw: Any, *, ref: str, path: str) -> LegacyPodClaim:
    try:
        return LegacyPodClaim.from_dict(raw)
    except ValidationError as exc:
        sub = f"{path}.{exc.path}" if exc.path else path
        raise MigrationError(exc.message, object_ref=ref, field=sub) from exc


def _source_field(claim: LegacyPodClaim, *, ref: str, path: str) -> tuple[str, str]:
    src = claim.source
    assert src is not None
    if bool(src.resource_claim_name) == bool(src.resource_claim_template_name):
        raise MigrationError(
            "exactly one of resourceClaimName and resourceClaimTemplateName is required",
            object_ref=ref,
            field=f"{path}.source",
        )
    if src.resource_claim_name:
        return "resourceClaimName", src.resource_claim_name
    assert src.resource_claim_template_name
    return "resourceClaimTemplateName", src.resource_claim_template_name


def fix_claim_references(spec: dict[str, Any], *, ref: str, path: str) -> list[str]:
    """Rewrite classic claim references in place to the v1 pod fields."""
    notes: list[str] = []
    refs: list[Any] = spec.setdefault("resourceClaims", [])
    by_name: dict[str, dict[str, Any]] = {}
    for i, raw in enumerate(refs):
        rpath = f"{path}.resourceClaims[{i}]"
        claim = _claim_ref(raw, ref=ref, path=rpath)
        if claim.source is not None:
            key, value = _source_field(claim, ref=ref, path=rpath)
            del raw["source"]
            raw[key] = value
            notes.append(f"{rpath}: source.{key} -> {key}")
        by_name[claim.name] = raw
    for group in CONTAINER_GROUPS:
        for c, ctr in enumerate(spec.get(group) or []):
            if not isinstance(ctr, dict) or "resourceClaims" not in ctr:
                continue
            cpath = f"{path}.{group}[{c}]"
            entries = ctr.pop("resourceClaims") or []
            claims = ctr.setdefault("resources", {}).setdefault("claims", [])
            for j, raw in enumerate(entries):
                epath = f"{cpath}.resourceClaims[{j}]"
                claim = _claim_ref(raw, ref=ref, path=epath)
                if not claim.name:
                    raise MigrationError("required value", object_ref=ref, field=f"{epath}.name")
                pod_ref = by_name.get(claim.name)
                if pod_ref is None:
                    pod_ref = {"name": claim.name}
                    refs.append(pod_ref)
                    by_name[claim.name] = pod_ref
                if claim.source is not None:
                    key, value = _source_field(claim, ref=ref, path=epath)
                    other = {k: v for k, v in pod_ref.items() if k != "name"}
                    if other and other != {key: value}:
                        raise MigrationError(
                            f"claim {claim.name!r} is referenced differently at the pod level",
                            object_ref=ref,
                            field=f"{epath}.source",
                        )
                    pod_ref[key] = value
                if not any(isinstance(x, Mapping) and x.get("name") == claim.name for x in claims):
                    claims.append({"name": claim.name})
                notes.append(
                    f"{epath} -> {cpath}.resources.claims[name={claim.name}] and "
                    f"{path}.resourceClaims[name={claim.name}]"
                )
    if not refs:
        del spec["resourceClaims"]
    return notes


@dataclass(frozen=True, slots=True)
class ExtendedRequest:
    """One extended resource a container asks for, and where that container is."""

    group: str
    index: int
    container: str
    resource: str
    count: int
    request_name: str
    device_class: str | None


def extended_class(resource: str, mapping: Mapping[str, str]) -> str | None:
    """The DeviceClass that serves an extended resource name, if any."""
    if resource.startswith(IMPLICIT_PREFIX):
        return resource[len(IMPLICIT_PREFIX) :]
    return mapping.get(resource)


def _locations(spec: Mapping[str, Any]) -> list[tuple[str, int]]:
    """(group, index) of every container, init containers first (the scheduler's order)."""
    return [(group, i) for group in CONTAINER_GROUPS for i, _ in enumerate(spec.get(group) or [])]


def extended_requests(
    spec: Mapping[str, Any], mapping: Mapping[str, str], *, ref: str, path: str
) -> Iterator[ExtendedRequest]:
    """Device extended resources (``nvidia.com/...``, mapped or implicit) the pod requests."""
    try:
        # Only the containers: the rest of a user's pod spec is not this tool's to judge.
        containers = {group: spec[group] for group in CONTAINER_GROUPS if group in spec}
        pod = read_pod({"metadata": {"name": ref}, "spec": containers}, where=ref)
        found = pod_extended_requests(pod)
    except AllocationError as exc:
        # The field is relative to a pod; the workload keeps its pod spec at ``path``.
        relative = exc.field.removeprefix("spec")
        raise MigrationError(exc.message, object_ref=ref, field=f"{path}{relative}") from exc
    locations = _locations(spec)
    for req in found:
        if not (
            req.resource in mapping or req.resource.startswith((IMPLICIT_PREFIX, "nvidia.com/"))
        ):
            continue
        group, index = locations[int(req.request_name.split("-")[1])]
        yield ExtendedRequest(
            group,
            index,
            req.container,
            req.resource,
            req.count,
            req.request_name,
            extended_class(req.resource, mapping),
        )


def keep_extended_notes(requests: list[ExtendedRequest]) -> list[str]:
    """Notes for leaving device-plugin requests as they are (the default)."""
    notes = []
    for req in requests:
        if req.device_class:
            notes.append(
                f"container {req.container}: {req.resource}: {req.count} left unchanged: on "
                f"Kubernetes 1.37+ the scheduler serves it through DeviceClass "
                f"{req.device_class} (extendedResourceName) with a claim it creates; "
                "--to-claims rewrites it to a ResourceClaimTemplate"
            )
        else:
            notes.append(
                f"container {req.container}: {req.resource}: {req.count} left unchanged, but no "
                f"DeviceClass in the input sets extendedResourceName: {req.resource}; create "
                "one (or keep a device plugin for it on its nodes)"
            )
    return notes


def to_claims(
    obj: dict[str, Any],
    spec: dict[str, Any],
    requests: list[ExtendedRequest],
    *,
    ref: str,
    path: str,
) -> tuple[dict[str, Any], list[str]]:
    """Rewrite device-plugin requests in place into claims; returns the new template.

    Requests are named as the scheduler names those of its own claim
    (``container-<i>-request-<j>``, see :mod:`dra_allocator.extended_resources`), each
    container using only its own.
    """
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise MigrationError(
            "required to name the ResourceClaimTemplate --to-claims creates",
            object_ref=ref,
            field="metadata.name",
        )
    device_requests: list[dict[str, Any]] = []
    notes: list[str] = []
    claim_ref = EXTENDED_CLAIM
    template = f"{name}-{EXTENDED_CLAIM}"
    for req in requests:
        if req.device_class is None:
            raise MigrationError(
                f"no DeviceClass in the input sets extendedResourceName: {req.resource} "
                "(pass it with -f)",
                object_ref=ref,
                field=f'{path}.{req.group}[{req.index}].resources.limits["{req.resource}"]',
            )
        request_name = req.request_name
        device_requests.append(
            {
                "name": request_name,
                "exactly": {"deviceClassName": req.device_class, "count": req.count},
            }
        )
        ctr = spec[req.group][req.index]
        resources = ctr["resources"]
        for where in ("limits", "requests"):
            if req.resource in (resources.get(where) or {}):
                del resources[where][req.resource]
                if not resources[where]:
                    del resources[where]
        resources.setdefault("claims", []).append({"name": claim_ref, "request": request_name})
        notes.append(
            f"container {req.container}: {req.resource}: {req.count} -> request "
            f"{request_name} ({req.count} x DeviceClass {req.device_class}) of "
            f"ResourceClaimTemplate {template}"
        )
    spec.setdefault("resourceClaims", []).append(
        {"name": claim_ref, "resourceClaimTemplateName": template}
    )
    tmpl_meta: dict[str, Any] = {"name": template}
    if meta.get("namespace"):
        tmpl_meta["namespace"] = meta["namespace"]
    tmpl = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": tmpl_meta,
        "spec": {"spec": {"devices": {"requests": device_requests}}},
    }
    return tmpl, notes
