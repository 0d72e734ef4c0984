"""Extended resources backed by DRA (KEP 5004, GA in Kubernetes 1.37), as the scheduler does.

A pod whose containers request an extended resource (``nvidia.com/gpu: 1``) that a
DeviceClass maps (``spec.extendedResourceName``, or the implicit
``deviceclass.resource.kubernetes.io/<class>``) gets a special ResourceClaim, created by the
scheduler: one ``exactly`` request per container and resource, named
``container-<i>-request-<j>`` (``i`` over initContainers then containers, ``j`` the index
of the resource among the container's sorted requests). Per node: a resource the node's
allocatable advertises (a device plugin) is served by the device plugin, not by DRA; one
neither advertised nor mapped does not fit. Pure: pods and classes in, plans out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from dra_api_types import (
    Container,
    DeviceClaim,
    DeviceRequest,
    ExactDeviceRequest,
    ObjectMeta,
    OwnerReference,
    Pod,
    ResourceClaim,
    ResourceClaimSpec,
)
from dra_api_types.errors import QuantityError
from dra_api_types.quantity import Quantity

from .errors import AllocationError
from .model import ClassInfo
from .nodes import NodeInfo

IMPLICIT_PREFIX: Final = "deviceclass.resource.kubernetes.io/"
CLAIM_ANNOTATION: Final = "resource.kubernetes.io/extended-resource-claim"
CLAIM_SUFFIX: Final = "-extended-resources"
_NATIVE_PREFIXES: Final = ("kubernetes.io/", "requests.")


@dataclass(frozen=True, slots=True)
class ExtendedRequest:
    """One container's request of one extended resource."""

    container: str
    request_name: str
    resource: str
    count: int


@dataclass(slots=True)
class NodePlan:
    """How a pod's extended resources would be served on one node."""

    node: str
    dra: list[tuple[ExtendedRequest, str]] = field(default_factory=list)
    device_plugin: list[str] = field(default_factory=list)
    unfit: list[str] = field(default_factory=list)


def is_extended_resource(name: str) -> bool:
    """Whether a resource name is an extended resource (not cpu, memory, hugepages...)."""
    if name.startswith(IMPLICIT_PREFIX):
        return True
    return "/" in name and not name.startswith(_NATIVE_PREFIXES)


def class_mapping(classes: Iterable[ClassInfo]) -> dict[str, str]:
    """Extended resource name -> DeviceClass: implicit names, then explicit ones.

    Where several classes set the same ``extendedResourceName`` the newest one wins (by
    ``creationTimestamp``, then name), as in the scheduler.
    """
    mapping: dict[str, str] = {}
    explicit: dict[str, tuple[str, str]] = {}
    for cls in classes:
        mapping[IMPLICIT_PREFIX + cls.name] = cls.name
        name = cls.obj.spec.extended_resource_name
        if name:
            stamp = cls.obj.metadata.creation_timestamp or ""
            if name not in explicit or (stamp, cls.name) > explicit[name]:
                explicit[name] = (stamp, cls.name)
    mapping.update({res: cls for res, (_, cls) in explicit.items()})
    return mapping


def pod_ref(pod: Pod) -> str:
    """``namespace/name`` of a pod (``?`` for a pod without a name)."""
    return f"{pod.namespace}/{pod.name or '?'}"


def _count(value: Any, *, pod: str, path: str) -> int:
    try:
        quantity = Quantity.coerce(value)
    except (QuantityError, TypeError, ValueError) as exc:
        raise AllocationError(
            f"not a quantity: {value!r}", object_ref=f"Pod {pod}", field=path
        ) from exc
    if not quantity.is_integer():
        raise AllocationError(
            f"extended resources must be whole numbers, got {value!r}",
            object_ref=f"Pod {pod}",
            field=path,
        )
    return quantity.as_int()


def _containers(pod: Pod) -> list[tuple[str, Container]]:
    return [
        (f"spec.{group}[{i}]", c)
        for group, containers in pod.spec.container_groups()
        for i, c in enumerate(containers)
    ]


def effective_requests(container: Container) -> dict[str, Any]:
    """A container's requests, limits filling in what requests leave out (API defaulting)."""
    resources = container.resources
    if resources is None:
        return {}
    return {**(resources.limits or {}), **(resources.requests or {})}


def pod_extended_requests(pod: Pod) -> list[ExtendedRequest]:
    """Every non-zero extended resource request of the pod, named as the scheduler does."""
    ref = pod_ref(pod)
    out: list[ExtendedRequest] = []
    for index, (path, ctr) in enumerate(_containers(pod)):
        requests = effective_requests(ctr)
        for j, resource in enumerate(sorted(requests)):
            if not is_extended_resource(resource):
                continue
            count = _count(requests[resource], pod=ref, path=f'{path}.resources["{resource}"]')
            if count > 0:
                out.append(
                    ExtendedRequest(
                        ctr.name,
                        f"container-{index}-request-{j}",
                        resource,
                        count,
                    )
                )
    return sorted(out, key=lambda r: r.request_name)


def pod_total(pod: Pod, resource: str) -> int:
    """What the pod needs of a resource: the sum over containers, or the largest init one."""
    ref = pod_ref(pod)

    def one(ctr: Container) -> int:
        value = effective_requests(ctr).get(resource)
        return 0 if value is None else _count(value, pod=ref, path=resource)

    regular = sum(one(c) for c in pod.spec.containers)
    init = max((one(c) for c in pod.spec.init_containers or []), default=0)
    return max(regular, init)


def plan_node(
    pod: Pod,
    requests: Sequence[ExtendedRequest],
    mapping: Mapping[str, str],
    node: NodeInfo,
    *,
    bound_pods: Sequence[Pod] = (),
) -> NodePlan:
    """Which of the pod's extended resources DRA serves on the node, which a device plugin."""
    plan = NodePlan(node=node.name)
    resources = sorted({r.resource for r in requests})
    for resource in resources:
        raw = node.allocatable.get(resource)
        allocatable = _count(raw, pod=pod_ref(pod), path=resource) if raw is not None else None
        if allocatable is not None and (allocatable > 0 or resource not in mapping):
            used = sum(pod_total(p, resource) for p in bound_pods)
            want = pod_total(pod, resource)
            if want > allocatable - used:
                plan.unfit.append(
                    f"Insufficient {resource}: the device plugin of node {node.name} has "
                    f"{allocatable - used} of {allocatable} free, the pod needs {want}"
                )
            else:
                plan.device_plugin.append(resource)
        elif resource in mapping:
            plan.dra.extend((r, mapping[resource]) for r in requests if r.resource == resource)
        else:
            plan.unfit.append(
                f"{resource}: no device plugin on node {node.name} advertises it and no "
                f"DeviceClass sets extendedResourceName: {resource}"
            )
    plan.dra.sort(key=lambda item: item[0].request_name)
    return plan


def special_claim_name(pod: Pod) -> str:
    """The name the offline tools give the scheduler's claim (the API adds a random suffix)."""
    return f"{pod.name or '?'}{CLAIM_SUFFIX}"


def special_claim(pod: Pod, plan: NodePlan) -> ResourceClaim:
    """The v1 ResourceClaim the scheduler would create for the pod on the plan's node."""
    owner = OwnerReference(api_version="v1", kind="Pod", name=pod.name, controller=True)
    requests = [
        DeviceRequest(
            name=req.request_name,
            exactly=ExactDeviceRequest(
                device_class_name=cls, allocation_mode="ExactCount", count=req.count
            ),
        )
        for req, cls in plan.dra
    ]
    return ResourceClaim(
        metadata=ObjectMeta(
            name=special_claim_name(pod),
            namespace=pod.namespace,
            annotations={CLAIM_ANNOTATION: "true"},
            owner_references=[owner],
        ),
        spec=ResourceClaimSpec(devices=DeviceClaim(requests=requests)),
    )


def request_mappings(plan: NodePlan) -> list[dict[str, str]]:
    """``status.extendedResourceClaimStatus.requestMappings`` for the plan."""
    return [
        {"containerName": r.container, "requestName": r.request_name, "resourceName": r.resource}
        for r, _ in plan.dra
    ]


def existing_special_claim(pod: Pod, claims: Iterable[ResourceClaim]) -> str | None:
    """The name of the scheduler's claim of a pod, from its status or owner and annotation."""
    status = pod.status.extended_resource_claim_status
    if status is not None and status.resource_claim_name:
        return status.resource_claim_name
    meta = pod.metadata
    for claim in claims:
        cmeta = claim.metadata
        if (cmeta.annotations or {}).get(CLAIM_ANNOTATION) != "true":
            continue
        if (cmeta.namespace or "default") != pod.namespace:
            continue
        for owner in cmeta.owner_references or []:
            if (
                owner.kind == "Pod"
                and owner.name == meta.name
                and (not meta.uid or owner.uid in ("", meta.uid))
            ):
                return str(cmeta.name)
    return None
