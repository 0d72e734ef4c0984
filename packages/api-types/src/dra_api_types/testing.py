"""Builders of ``resource.k8s.io/v1`` objects (and Pods) for tests, as the API server stores them.

Every package's tests build claims, classes, slices and pods; these builders give each object's
shape once, with keyword arguments for the parts tests vary. They return plain JSON (what a
:class:`~dra_kube_client.testing.MemoryApi` stores and what the models' ``from_dict`` reads),
leaving out every optional field not asked for::

    from dra_api_types import ResourceClaim
    from dra_api_types.testing import allocation, device_result, exactly, resource_claim

    raw = resource_claim(
        "c1",
        namespace="team",
        requests=[exactly("gpu", count=2, selectors=["device.driver == 'gpu.nvidia.com'"])],
        allocation=allocation([device_result("gpu-0", pool="node-1")], node="node-1"),
    )
    claim = ResourceClaim.from_dict(raw)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .nvidia_v1beta1 import GPU_DRIVER

__all__ = [
    "RESOURCE_V1",
    "allocation",
    "device_class",
    "device_result",
    "exactly",
    "node_selector",
    "object_meta",
    "opaque_config",
    "pod",
    "resource_claim",
    "resource_slice",
]

RESOURCE_V1: Final = "resource.k8s.io/v1"

JsonObject = dict[str, Any]


def object_meta(
    name: str,
    *,
    namespace: str | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
    labels: Mapping[str, str] | None = None,
    creation_timestamp: str | None = None,
) -> JsonObject:
    """``metadata`` with the fields given (``None`` leaves a field out)."""
    meta: JsonObject = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    if labels is not None:
        meta["labels"] = dict(labels)
    if creation_timestamp is not None:
        meta["creationTimestamp"] = creation_timestamp
    return meta


def exactly(
    name: str = "gpu",
    *,
    device_class: str = GPU_DRIVER,
    count: int | None = None,
    selectors: Sequence[str] = (),
    allocation_mode: str | None = None,
    admin_access: bool | None = None,
) -> JsonObject:
    """A ``DeviceRequest`` of ``exactly`` one kind of device; ``selectors`` are CEL texts."""
    body: JsonObject = {"deviceClassName": device_class}
    if allocation_mode is not None:
        body["allocationMode"] = allocation_mode
    if count is not None:
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    if admin_access is not None:
        body["adminAccess"] = admin_access
    return {"name": name, "exactly": body}


def opaque_config(
    driver: str,
    parameters: Mapping[str, Any],
    *,
    requests: Sequence[str] | None = None,
    source: str | None = None,
) -> JsonObject:
    """An opaque device configuration (of a claim's spec, a class, or an allocation when
    ``source`` is ``FromClaim``/``FromClass``)."""
    config: JsonObject = {}
    if source is not None:
        config["source"] = source
    if requests is not None:
        config["requests"] = list(requests)
    config["opaque"] = {"driver": driver, "parameters": dict(parameters)}
    return config


def device_result(
    device: str,
    *,
    pool: str,
    request: str = "gpu",
    driver: str = GPU_DRIVER,
    admin_access: bool = False,
) -> JsonObject:
    """One ``DeviceRequestAllocationResult``."""
    result: JsonObject = {"request": request, "driver": driver, "pool": pool, "device": device}
    if admin_access:
        result["adminAccess"] = True
    return result


def node_selector(node: str) -> JsonObject:
    """The node selector the scheduler writes for a node-local allocation."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {"nodeSelectorTerms": [term]}


def allocation(
    results: Sequence[Mapping[str, Any]],
    *,
    config: Sequence[Mapping[str, Any]] | None = None,
    node: str | None = None,
) -> JsonObject:
    """An ``AllocationResult``: ``results``, their ``config``, and the ``node`` it is on."""
    devices: JsonObject = {"results": [dict(r) for r in results]}
    if config is not None:
        devices["config"] = [dict(c) for c in config]
    body: JsonObject = {"devices": devices}
    if node is not None:
        body["nodeSelector"] = node_selector(node)
    return body


def resource_claim(
    name: str,
    *,
    namespace: str = "default",
    uid: str | None = None,
    resource_version: str | None = None,
    requests: Sequence[Mapping[str, Any]] = (),
    constraints: Sequence[Mapping[str, Any]] | None = None,
    config: Sequence[Mapping[str, Any]] | None = None,
    allocation: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str = RESOURCE_V1,
) -> JsonObject:
    """A ``ResourceClaim`` asking for ``requests`` (with ``constraints`` and ``config``);
    ``allocation`` becomes
    ``status.allocation``, ``status`` the whole status (the two are exclusive)."""
    if allocation is not None and status is not None:
        raise ValueError(f"claim {namespace}/{name}: give allocation or status, not both")
    devices: JsonObject = {"requests": [dict(r) for r in requests]}
    if constraints is not None:
        devices["constraints"] = [dict(c) for c in constraints]
    if config is not None:
        devices["config"] = [dict(c) for c in config]
    claim: JsonObject = {
        "apiVersion": api_version,
        "kind": "ResourceClaim",
        "metadata": object_meta(
            name, namespace=namespace, uid=uid, resource_version=resource_version
        ),
        "spec": {"devices": devices},
    }
    if allocation is not None:
        claim["status"] = {"allocation": dict(allocation)}
    elif status is not None:
        claim["status"] = dict(status)
    return claim


def device_class(
    name: str,
    *,
    selectors: Sequence[str] = (),
    config: Sequence[Mapping[str, Any]] | None = None,
    extended_resource_name: str | None = None,
    resource_version: str | None = None,
    creation_timestamp: str | None = None,
) -> JsonObject:
    """A ``DeviceClass`` selecting with the CEL texts ``selectors``."""
    spec: JsonObject = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if config is not None:
        spec["config"] = [dict(c) for c in config]
    if extended_resource_name is not None:
        spec["extendedResourceName"] = extended_resource_name
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "DeviceClass",
        "metadata": object_meta(
            name, resource_version=resource_version, creation_timestamp=creation_timestamp
        ),
        "spec": spec,
    }


def resource_slice(
    name: str,
    *,
    pool: str,
    driver: str = GPU_DRIVER,
    node_name: str | None = None,
    devices: Sequence[Mapping[str, Any]] | None = None,
    generation: int = 1,
    slice_count: int = 1,
    resource_version: str | None = None,
    spec: Mapping[str, Any] | None = None,
) -> JsonObject:
    """A ``ResourceSlice`` of ``pool``; ``spec`` adds fields (``allNodes``,
    ``sharedCounters``, ...) or replaces the ones built."""
    body: JsonObject = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": slice_count},
    }
    if node_name is not None:
        body["nodeName"] = node_name
    if devices is not None:
        body["devices"] = [dict(d) for d in devices]
    body.update(spec or {})
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceSlice",
        "metadata": object_meta(name, resource_version=resource_version),
        "spec": body,
    }


def pod(
    name: str,
    *,
    namespace: str = "default",
    uid: str | None = None,
    resource_version: str | None = None,
    claims: Mapping[str, str] | None = None,
    containers: Sequence[Mapping[str, Any]] = ({"name": "c"},),
    status: Mapping[str, Any] | None = None,
) -> JsonObject:
    """A ``v1`` Pod; ``claims`` maps the pod's claim names to the ResourceClaims they use."""
    spec: JsonObject = {}
    if claims is not None:
        spec["resourceClaims"] = [
            {"name": n, "resourceClaimName": claim} for n, claim in claims.items()
        ]
    spec["containers"] = [dict(c) for c in containers]
    obj: JsonObject = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": object_meta(
            name, namespace=namespace, uid=uid, resource_version=resource_version
        ),
        "spec": spec,
    }
    if status is not None:
        obj["status"] = dict(status)
    return obj
