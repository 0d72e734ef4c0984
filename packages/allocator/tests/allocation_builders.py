"""Building v1 objects from the compact notation of the conformance table (test support)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dra_api_types import testing as builders

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
    extra = {
        k: spec[k]
        for k in ("allNodes", "nodeSelector", "perDeviceNodeSelection", "sharedCounters")
        if k in spec
    }
    return builders.resource_slice(
        spec["name"],
        driver=spec.get("driver", DRIVER),
        pool=spec.get("pool", spec.get("node", spec["name"])),
        generation=spec.get("generation", 1),
        slice_count=spec.get("count", 1),
        node_name=spec.get("node"),
        devices=[device(d) for d in spec["devices"]] if "devices" in spec else None,
        spec=extra,
    )


def device_class(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Compact class -> v1 DeviceClass."""
    return builders.device_class(
        spec["name"], selectors=spec.get("selectors", []), config=spec.get("config")
    )


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
    namespace, _, short = spec["name"].rpartition("/")
    return builders.resource_claim(
        short,
        namespace=namespace or "default",
        uid=f"uid-{short}",
        requests=requests,
        constraints=spec.get("constraints"),
        config=spec.get("config"),
        allocation=spec.get("allocation"),
    )


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
