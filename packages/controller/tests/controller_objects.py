"""GPU-like v1 objects with resourceVersions, for the allocation controller tests."""

from __future__ import annotations

from typing import Any

from dra_api_types import testing as builders
from dra_api_types.testing import (
    allocation,
    device_result,
    exactly,
    resource_claim,
    resource_slice,
)
from dra_kube_client.informers import Store

DRIVER = "gpu.nvidia.com"


def gpu(name: str, memory: str, product: str = "NVIDIA A100", **extra: Any) -> dict[str, Any]:
    """A full GPU device."""
    return {
        "name": name,
        "attributes": {"type": {"string": "gpu"}, "productName": {"string": product}},
        "capacity": {"memory": {"value": memory}},
        **extra,
    }


def mig(name: str, profile: str, **extra: Any) -> dict[str, Any]:
    """A MIG device."""
    return {
        "name": name,
        "attributes": {
            "type": {"string": "mig"},
            "profile": {"string": profile},
            "productName": {"string": "NVIDIA A100"},
        },
        "capacity": {"memory": {"value": "5Gi"}},
        **extra,
    }


def slice_(node: str, devices: list[dict[str, Any]], rv: str = "1", **spec: Any) -> dict[str, Any]:
    """A node-local slice of one-slice pool ``node``."""
    return resource_slice(
        f"{node}-slice",
        pool=node,
        driver=DRIVER,
        node_name=node,
        devices=devices,
        resource_version=rv,
        spec=spec,
    )


def device_class(name: str, expr: str, rv: str = "1") -> dict[str, Any]:
    """A DeviceClass with one selector."""
    return builders.device_class(name, selectors=[expr], resource_version=rv)


GPU_CLASS = device_class(
    "gpu.nvidia.com", f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
)
MIG_CLASS = device_class(
    "mig.nvidia.com", f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig'"
)


def claim(
    name: str,
    *,
    ns: str = "team",
    cls: str = "gpu.nvidia.com",
    selector: str | None = None,
    allocated_on: tuple[str, str] | None = None,
    rv: str = "1",
) -> dict[str, Any]:
    """A one-request claim (``gpu``), optionally allocated to (node, device)."""
    placed = None
    if allocated_on:
        node_name, dev = allocated_on
        placed = allocation([device_result(dev, pool=node_name, driver=DRIVER)], node=node_name)
    return resource_claim(
        name,
        namespace=ns,
        uid=f"uid-{name}",
        resource_version=rv,
        requests=[exactly("gpu", device_class=cls, selectors=[selector] if selector else ())],
        allocation=placed,
    )


def pod(
    name: str, claim_name: str, *, ns: str = "team", unschedulable: bool = True
) -> dict[str, Any]:
    """A pod using one claim, marked Unschedulable by the scheduler."""
    conditions = []
    if unschedulable:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    return builders.pod(
        name,
        namespace=ns,
        uid=f"uid-pod-{name}",
        resource_version="1",
        claims={"gpu": claim_name},
        status={"phase": "Pending", "conditions": conditions},
    )


def node(name: str) -> dict[str, Any]:
    """A Node."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "resourceVersion": "1"}}


def stores(objects: list[dict[str, Any]]) -> dict[str, Store]:
    """Stores by kind, filled with ``objects``."""
    out = {
        k: Store(k)
        for k in ("DeviceClass", "ResourceSlice", "ResourceClaim", "Node", "Pod", "DeviceTaintRule")
    }
    for obj in objects:
        out[obj["kind"]].upsert(obj)
    return out
