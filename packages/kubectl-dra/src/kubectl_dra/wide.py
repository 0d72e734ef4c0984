"""``-o wide``: each command's data as kubectl's wide table, built from the same data that
``-o json|yaml`` print, so the three never disagree (pure).

- ``allocate``: one row per allocated device (claim, the pod using it, node, request,
  driver, pool, device, the device's ``productName`` and ``memory`` from its ResourceSlice,
  the configs that apply to the request by source and kind); one row per claim or pod that
  could not be allocated, with the first reason (``+N more`` when there are others); a pod
  whose extended resources a device plugin serves, by node and resource names.
- ``validate``: one row per finding (location, severity, kind, name, field, message).
- ``classes``: one row per DeviceClass (extended resource name, CEL selectors, configs).
- ``migrate``: one row per object written (kind, namespace, name, API version).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dra_allocator.model import DeviceInfo
from dra_allocator.snapshot import Snapshot
from dra_api_types.core_v1 import Pod

from .findings import Finding
from .table import Table

ALLOCATE_COLUMNS = (
    "NAMESPACE", "CLAIM", "POD", "STATE", "NODE", "REQUEST", "DRIVER", "POOL", "DEVICE",
    "PRODUCT", "MEMORY", "CONFIG", "REASON",
)  # fmt: skip
FINDING_COLUMNS = ("LOCATION", "SEVERITY", "KIND", "NAME", "FIELD", "MESSAGE")
CLASS_COLUMNS = ("NAME", "EXTENDED RESOURCE", "SELECTORS", "CONFIG")
OBJECT_COLUMNS = ("KIND", "NAMESPACE", "NAME", "APIVERSION")
ALLOCATED, UNALLOCATED = "allocated", "unallocated"


def split_ref(object_ref: str) -> tuple[str, str]:
    """``Kind ns/name`` (how findings name objects) as ``(Kind, ns/name)``; a reference
    without a kind (``file#2``) is all name."""
    kind, _, name = object_ref.partition(" ")
    if not name or not kind[:1].isupper():
        return "", object_ref
    return kind, name


def _first_reason(reasons: Sequence[str]) -> str:
    if len(reasons) > 1:
        return f"{reasons[0]} (+{len(reasons) - 1} more)"
    return reasons[0] if reasons else ""


def _devices(snapshot: Snapshot) -> dict[tuple[str, str, str], DeviceInfo]:
    return {d.id: d for s in snapshot.slices for d in s.devices}


def _attribute(device: DeviceInfo | None, name: str) -> str:
    if device is None:
        return ""
    found = device.lookup_attribute(f"{device.driver}/{name}")
    return "" if found is None else str(found[1])


def _capacity(device: DeviceInfo | None, name: str) -> str:
    capacity = None if device is None else device.capacity.get(name)
    return "" if capacity is None else str(capacity.quantity)


def _configs(configs: Iterable[Mapping[str, Any]], request: str) -> str:
    """``Source:Kind`` of each config that applies to ``request`` (a subrequest ``r/s`` is
    configured by entries naming ``r/s`` or ``r``; no names: every request)."""
    parent = request.split("/", 1)[0]
    out = []
    for config in configs:
        named = config.get("requests") or []
        if named and request not in named and parent not in named:
            continue
        opaque = config.get("opaque") or {}
        kind = (opaque.get("parameters") or {}).get("kind") or opaque.get("driver") or "opaque"
        out.append(f"{config.get('source', '')}:{kind}")
    return ",".join(out)


def _claim_pods(report: Mapping[str, Any], pods: Sequence[Pod]) -> dict[str, str]:
    """``ns/claim`` -> the pod that uses it (named in its spec or status, or the pod whose
    extended resources the claim serves)."""
    out: dict[str, str] = {}
    for pod in pods:
        names = [
            *(entry.resource_claim_name for entry in pod.spec.resource_claims or []),
            *(entry.resource_claim_name for entry in pod.status.resource_claim_statuses or []),
        ]
        for claim in names:
            if claim:
                out.setdefault(f"{pod.namespace}/{claim}", pod.name)
    for key, entry in (report.get("pods") or {}).items():
        ns, _, name = key.partition("/")
        extended = (entry.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        if extended:
            out[f"{ns}/{extended}"] = name
    return out


def allocate_table(report: Mapping[str, Any], snapshot: Snapshot) -> Table:
    """``allocate -o wide``: the report's claims by device, and the pods not allocated."""
    table = Table(ALLOCATE_COLUMNS)
    devices = _devices(snapshot)
    pods = _claim_pods(report, snapshot.pods)
    for key, entry in (report.get("claims") or {}).items():
        ns, _, name = key.partition("/")
        if not entry.get("allocated"):
            reason = _first_reason(entry.get("reasons") or [])
            table.add(ns, name, pods.get(key, ""), UNALLOCATED, *[""] * 8, reason)
            continue
        allocated = (entry.get("allocation") or {}).get("devices") or {}
        configs = allocated.get("config") or []
        for result in allocated.get("results") or []:
            device = devices.get((result["driver"], result["pool"], result["device"]))
            table.add(
                ns, name, pods.get(key, ""), ALLOCATED, str(entry.get("node", "")),
                result["request"], result["driver"], result["pool"], result["device"],
                _attribute(device, "productName"), _capacity(device, "memory"),
                _configs(configs, result["request"]), "",
            )  # fmt: skip
    for key, entry in (report.get("pods") or {}).items():
        ns, _, name = key.partition("/")
        if not entry.get("allocated") and entry.get("reasons"):
            reason = _first_reason(entry["reasons"])
            table.add(ns, "", name, UNALLOCATED, *[""] * 8, reason)
        elif entry.get("allocated") and entry.get("devicePlugin"):
            # Served by the node's device plugin: no claim, the resource names as request.
            plugin = ",".join(entry["devicePlugin"])
            table.add(ns, "", name, ALLOCATED, str(entry["node"]), plugin, *[""] * 7)
    return table


def findings_table(findings: Iterable[Finding]) -> Table:
    """``validate -o wide``: one row per finding."""
    table = Table(FINDING_COLUMNS)
    for finding in findings:
        kind, name = split_ref(finding.object_ref)
        severity = "warning" if finding.warning else "error"
        table.add(finding.where, severity, kind, name, finding.path, finding.message)
    return table


def classes_table(classes: Iterable[Mapping[str, Any]]) -> Table:
    """``classes -o wide``: one row per DeviceClass."""
    table = Table(CLASS_COLUMNS)
    for obj in classes:
        spec = obj.get("spec") or {}
        selectors = " && ".join(
            f"({s['cel']['expression']})" if len(spec.get("selectors") or []) > 1 else
            s["cel"]["expression"]
            for s in spec.get("selectors") or []
            if (s.get("cel") or {}).get("expression")
        )  # fmt: skip
        configs = ",".join(
            str(((c.get("opaque") or {}).get("parameters") or {}).get("kind", "opaque"))
            for c in spec.get("config") or []
        )
        table.add(
            str((obj.get("metadata") or {}).get("name", "")),
            str(spec.get("extendedResourceName") or ""),
            selectors,
            configs,
        )
    return table


def objects_table(objects: Iterable[Mapping[str, Any]]) -> Table:
    """``migrate -o wide``: one row per object written."""
    table = Table(OBJECT_COLUMNS)
    for obj in objects:
        meta = obj.get("metadata") or {}
        table.add(
            str(obj.get("kind", "")),
            str(meta.get("namespace") or ""),
            str(meta.get("name", "")),
            str(obj.get("apiVersion", "")),
        )
    return table
