"""Building v1 objects from the compact notation of the conformance table (test support)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DRIVER = "gpu.example.com"
DEFAULT_CLASS = {"name": "gpu", "selectors": [f'device.driver == "{DRIVER}"']}


def attr(value: Any) -> dict[str, Any]:
    """Compact attribute value -> v1 DeviceAttribute."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    return {"string": str(value)}


def device(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Compact device -> v1 Device (attributes typed, capacity values wrapped)."""
    out = {k: v for k, v in spec.items() if k not in ("attributes", "capacity")}
    if "attributes" in spec:
        out["attributes"] = {k: attr(v) for k, v in spec["attributes"].items()}
    if "capacity" in spec:
        out["capacity"] = {
            k: (dict(v) if isinstance(v, Mapping) else {"value": str(v)})
            for k, v in spec["capacity"].items()
        }
    return out


def resource_slice(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Compact slice -> v1 ResourceSlice."""
    body: dict[str, Any] = {
        "driver": spec.get("driver", DRIVER),
        "pool": {
            "name": spec.get("pool", spec.get("node", spec["name"])),
            "generation": spec.get("generation", 1),
            "resourceSliceCount": spec.get("count", 1),
        },
    }
    for key in ("allNodes", "nodeSelector", "perDeviceNodeSelection", "sharedCounters"):
        if key in spec:
            body[key] = spec[key]
    if "node" in spec:
        body["nodeName"] = spec["node"]
    if "devices" in spec:
        body["devices"] = [device(d) for d in spec["devices"]]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": spec["name"]},
        "spec": body,
    }


def device_class(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Compact class -> v1 DeviceClass."""
    body: dict[str, Any] = {
        "selectors": [{"cel": {"expression": e}} for e in spec.get("selectors", [])]
    }
    if "config" in spec:
        body["config"] = spec["config"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": spec["name"]},
        "spec": body,
    }


def _request_body(spec: Mapping[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": spec.get("class", "gpu")}
    if "mode" in spec:
        body["allocationMode"] = spec["mode"]
    if "count" in spec:
        body["count"] = spec["count"]
    elif spec.get("mode", "ExactCount") == "ExactCount":
        body["count"] = 1
    if "selectors" in spec:
        body["selectors"] = [{"cel": {"expression": e}} for e in spec["selectors"]]
    for key in ("adminAccess", "tolerations", "capacity"):
        if key in spec:
            body[key] = spec[key]
    return body


def resource_claim(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Compact claim -> v1 ResourceClaim."""
    requests = []
    for req in spec.get("requests", [{"name": "gpu"}]):
        if "firstAvailable" in req:
            requests.append(
                {
                    "name": req["name"],
                    "firstAvailable": [
                        {"name": s["name"], **_request_body(s)} for s in req["firstAvailable"]
                    ],
                }
            )
        else:
            requests.append({"name": req["name"], "exactly": _request_body(req)})
    devices: dict[str, Any] = {"requests": requests}
    if "constraints" in spec:
        devices["constraints"] = spec["constraints"]
    if "config" in spec:
        devices["config"] = spec["config"]
    name = spec["name"]
    namespace, _, short = name.rpartition("/")
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": short, "namespace": namespace or "default", "uid": f"uid-{short}"},
        "spec": {"devices": devices},
    }
    if "allocation" in spec:
        obj["status"] = {"allocation": spec["allocation"]}
    return obj


def node(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Compact node -> v1 Node."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": spec["name"], "labels": dict(spec.get("labels", {}))},
    }


def case_objects(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every object of a conformance case."""
    objects = [device_class(c) for c in case.get("classes", [DEFAULT_CLASS])]
    objects += [resource_slice(s) for s in case.get("slices", [])]
    objects += [resource_claim(c) for c in case.get("claims", [])]
    objects += [node(n) for n in case.get("nodes", [])]
    objects += [device_taint_rule(r) for r in case.get("taintRules", [])]
    return objects


def device_taint_rule(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A resource.k8s.io/v1beta2 DeviceTaintRule from ``{name, selector, taint}``."""
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": spec["name"]},
        "spec": {"deviceSelector": dict(spec.get("selector") or {}), "taint": dict(spec["taint"])},
    }
