"""Validate and summarize the seed walkthrough objects and NVIDIA's demo manifests.

``make demo`` runs this until the cluster demo exists. It loads every object with the
dra_api_types facade (kube-apiserver validation included), prints a short summary per object
and exits non-zero if any user-written object is invalid. Pass manifest files to check those
instead: ``python scripts/demo.py my-claims.yaml``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dra_api_types import (
    ApiObject,
    ComputeDomain,
    DeviceClaim,
    DeviceClaimConfiguration,
    DeviceClass,
    DeviceClassConfiguration,
    DeviceRequest,
    DeviceSelector,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    ValidationError,
    load_all,
    validation_errors,
)
from dra_api_types.nvidia_v1beta1 import decode_opaque_config

FIXTURES = Path(__file__).resolve().parents[1] / "packages" / "api-types" / "tests" / "fixtures"
SEED = FIXTURES / "seed"
DEMO_SPECS = FIXTURES / "nvidia-demo-specs"
# Objects the article shows as `kubectl get -oyaml` output: read like server objects (no
# validation), their API findings printed as notes.
SERVER_OUTPUT = {"resourceslice-gb200-pod2-f06-node05.yaml"}
ATTRIBUTES_SHOWN = ("type", "productName", "architecture", "uuid", "cudaComputeCapability")


def _name(obj: ApiObject | dict[str, Any]) -> str:
    if isinstance(obj, ApiObject):
        ref = obj.object_ref()
        name, namespace = ref.name, ref.namespace
    else:
        meta = obj.get("metadata") or {}
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
    return f"{namespace}/{name}" if namespace else name


def _selectors(selectors: list[DeviceSelector] | None) -> Iterable[str]:
    for selector in selectors or []:
        if selector.cel is not None:
            yield "selector: " + " ".join(selector.cel.expression.split())


def _configs(
    configs: list[DeviceClaimConfiguration] | list[DeviceClassConfiguration] | None,
) -> Iterable[str]:
    for config in configs or []:
        if config.opaque is None:
            continue
        targets = getattr(config, "requests", None)
        scope = f"requests {targets}" if targets else "all requests"
        params = config.opaque.parameters
        if str(params.get("apiVersion", "")).startswith("resource.nvidia.com/"):
            decoded = decode_opaque_config(params).normalize().to_dict()
            body = {k: v for k, v in decoded.items() if k not in ("apiVersion", "kind")}
            yield f"config for {scope}: {decoded['kind']} (normalized) {json.dumps(body)}"
        else:
            yield f"config for {scope}: opaque for {config.opaque.driver}"


def _requests(requests: list[DeviceRequest] | None) -> Iterable[str]:
    for request in requests or []:
        if request.exactly is not None:
            ex = request.exactly
            mode = ex.allocation_mode or "ExactCount"
            amount = "all" if mode == "All" else str(ex.count or 1)
            yield f"request {request.name}: {amount} x {ex.device_class_name}"
            yield from ("  " + s for s in _selectors(ex.selectors))
        for sub in request.first_available or []:
            yield (
                f"request {request.name}/{sub.name} (first available): "
                f"{sub.count or 1} x {sub.device_class_name}"
            )
            yield from ("  " + s for s in _selectors(sub.selectors))


def summarize(obj: ApiObject | dict[str, Any]) -> list[str]:
    """Lines describing one object."""
    if isinstance(obj, DeviceClass):
        lines = list(_selectors(obj.spec.selectors)) + list(_configs(obj.spec.config))
        if obj.spec.extended_resource_name:
            lines.append(f"extended resource: {obj.spec.extended_resource_name}")
        return lines
    if isinstance(obj, ResourceSlice):
        spec = obj.spec
        where = f"node {spec.node_name}" if spec.node_name else "all nodes or a node selector"
        count = len(spec.devices or [])
        lines = [f"driver {spec.driver}, pool {spec.pool.name}, {where}, {count} device(s)"]
        for device in spec.devices or []:
            attrs = device.attributes or {}
            shown = [f"{k}={attrs[k].value}" for k in ATTRIBUTES_SHOWN if k in attrs]
            shown += [f"{k}={c.value}" for k, c in (device.capacity or {}).items()]
            lines.append(f"{device.name}: " + " ".join(shown))
        return lines
    if isinstance(obj, ResourceClaimTemplate):
        devices = obj.spec.spec.devices
        return (
            list(_requests(devices.requests))
            + list(_constraints(devices))
            + list(_configs(devices.config))
        )
    if isinstance(obj, ResourceClaim):
        devices = obj.spec.devices
        lines = (
            list(_requests(devices.requests))
            + list(_constraints(devices))
            + list(_configs(devices.config))
        )
        if obj.status.allocation is not None:
            for result in obj.status.allocation.devices.results or []:
                lines.append(
                    f"allocated: {result.request} -> {result.driver}/{result.pool}/{result.device}"
                )
        return lines
    if isinstance(obj, ComputeDomain):
        channel = obj.normalize().spec.channel
        if channel is None:
            return [f"numNodes {obj.spec.num_nodes}, no channel"]
        return [
            f"numNodes {obj.spec.num_nodes}, channel claim template "
            f"{channel.resource_claim_template.name}, allocationMode {channel.allocation_mode}"
        ]
    if isinstance(obj, ApiObject):
        return [json.dumps(obj.to_dict().get("spec", {}))]
    pod_spec: dict[str, Any] = obj.get("spec") or {}
    claims = [
        f"{c.get('name')} <- "
        + (
            f"template {c['resourceClaimTemplateName']}"
            if "resourceClaimTemplateName" in c
            else f"claim {c.get('resourceClaimName')}"
        )
        for c in (
            pod_spec.get("resourceClaims")
            or pod_spec.get("template", {}).get("spec", {}).get("resourceClaims")
            or []
        )
    ]
    return [f"claims: {', '.join(claims)}"] if claims else []


def _constraints(devices: DeviceClaim) -> Iterable[str]:
    for constraint in devices.constraints or []:
        attr = constraint.match_attribute or constraint.distinct_attribute
        how = "same" if constraint.match_attribute else "distinct"
        yield f"constraint: {how} {attr} across {constraint.requests or 'all requests'}"


def _kind(obj: ApiObject | dict[str, Any]) -> str:
    if isinstance(obj, ApiObject):
        return obj.KIND
    if "kind" not in obj:
        return "document without apiVersion/kind (e.g. a mig-parted config):"
    return f"{obj.get('apiVersion')} {obj.get('kind')}"


def show(path: Path) -> bool:
    """Load, validate and print one manifest file; False if it holds an invalid object."""
    server_output = path.name in SERVER_OUTPUT
    print(f"--- {path.name}")
    try:
        objects = load_all(path, validate=not server_output)
    except ValidationError as exc:
        print(f"  INVALID {exc}")
        return False
    for obj in objects:
        passed = "" if isinstance(obj, ApiObject) else "  (not modeled here: passed through)"
        print(f"  {_kind(obj)} {_name(obj)}{passed}")
        for line in summarize(obj):
            print(f"      {line}")
        if server_output and isinstance(obj, ApiObject):
            for problem in validation_errors(obj):
                note = "note (server output trimmed in the article)"
                print(f"      {note}: {problem.path}: {problem.message}")
    return True


def main(argv: list[str]) -> int:
    """Check the given files, or the seed walkthrough and every NVIDIA demo manifest."""
    if argv:
        groups = [("manifests", [Path(a) for a in argv])]
    else:
        groups = [
            ("seed walkthrough (article 002)", sorted(SEED.glob("*.yaml"))),
            ("NVIDIA demo manifests", sorted(DEMO_SPECS.glob("*.yaml"))),
        ]
    ok = True
    for title, paths in groups:
        print(f"=== {title}")
        for path in paths:
            ok = show(path) and ok
    print("all objects valid" if ok else "INVALID objects found")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
