"""Turning picked devices into ``status.allocation`` (v1 JSON), as the scheduler writes it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_api_types import (
    Amount,
    DeviceClaimConfiguration,
    DeviceClassConfiguration,
    NodeSelectorRequirement,
    Quantity,
    QuantityFormat,
)

from .capacity import Consumption
from .errors import AllocationError
from .model import ClaimInfo, ClassInfo, DeviceInfo, RequestSpec
from .nodes import NodeInfo, node_name_selector


@dataclass(frozen=True, slots=True)
class PickedDevice:
    """One device picked for one request of a claim."""

    spec: RequestSpec
    device: DeviceInfo
    admin_access: bool
    share_id: str | None
    consumed: Consumption | None


_BINARY_SUFFIXES = ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def format_quantity(value: Amount, raw: object) -> str:
    """A quantity as the apiserver stores it (canonical form of its format).

    ``raw is None`` is a computed value (a rounded request), which the scheduler creates in
    the binary format; a binary value without an exact binary suffix is written as a plain
    number, which the apiserver reads back as decimal: "3000000000" is stored as "3G".
    """
    if raw is None:
        text = Quantity(value, QuantityFormat.BINARY_SI).canonical()
        if text.endswith(_BINARY_SUFFIXES):
            return text
        return Quantity(value).canonical()
    text = str(raw).strip()
    if text.endswith(_BINARY_SUFFIXES):
        return Quantity.coerce(text).canonical()
    if "e" in text.lower() and not text.endswith("E"):
        return text
    return Quantity(value).canonical()


def device_result(picked: PickedDevice, *, binding: bool) -> dict[str, Any]:
    """One DeviceRequestAllocationResult."""
    dev = picked.device
    out: dict[str, Any] = {
        "request": picked.spec.full_name,
        "driver": dev.id[0],
        "pool": dev.id[1],
        "device": dev.id[2],
    }
    if picked.admin_access:
        out["adminAccess"] = True
    if picked.spec.tolerations_raw:
        out["tolerations"] = [t.to_dict() for t in picked.spec.tolerations_raw]
    if binding:
        if dev.binding_conditions:
            out["bindingConditions"] = list(dev.binding_conditions)
        if dev.binding_failure_conditions:
            out["bindingFailureConditions"] = list(dev.binding_failure_conditions)
    if picked.share_id is not None:
        out["shareID"] = picked.share_id
    if picked.consumed:
        out["consumedCapacity"] = {
            name: format_quantity(value, raw) for name, (value, raw) in picked.consumed.items()
        }
    return out


def build_allocation(
    claim: ClaimInfo,
    picked: Sequence[PickedDevice],
    *,
    classes: Sequence[tuple[ClassInfo, str]],
    selected_subrequests: Mapping[int, RequestSpec],
    node: NodeInfo,
    binding: bool,
    drop_covering_requests: bool = True,
) -> dict[str, Any]:
    """The AllocationResult of one claim: results, class then claim configs, node selector.

    ``drop_covering_requests`` (Kubernetes 1.37+): a claim config is added once, not once
    per request it names, and a config whose request list names every request of the
    claim (or its selected subrequest) loses the list, since empty means all.
    """
    devices: dict[str, Any] = {"results": [device_result(p, binding=binding) for p in picked]}
    config: list[dict[str, Any]] = []
    class_ranges: dict[str, tuple[int, int]] = {}
    for cls, request_name in classes:
        existing = class_ranges.get(cls.name)
        if existing is not None:
            for i in range(*existing):
                config[i]["requests"].append(request_name)
            continue
        begin = len(config)
        for cfg in cls.config:
            config.append({"source": "FromClass", "requests": [request_name], **_body(cfg)})
        class_ranges[cls.name] = (begin, len(config))
    for claim_cfg in claim.config:
        names = list(claim_cfg.requests or [])
        if not names:
            config.append({"source": "FromClaim", **_body(claim_cfg)})
            continue
        # 1.36 appends the config once per request it names; 1.37 once per config.
        for r, req in enumerate(claim.requests):
            sub = selected_subrequests.get(r)
            if req.name in names or (sub is not None and sub.full_name in names):
                config.append({"source": "FromClaim", "requests": names, **_body(claim_cfg)})
                if drop_covering_requests:
                    break
    if drop_covering_requests:
        for entry in config:
            if entry.get("requests") and _covers_every_request(
                entry["requests"], claim, selected_subrequests
            ):
                del entry["requests"]
    if config:
        devices["config"] = config
    result: dict[str, Any] = {"devices": devices}
    selector = result_node_selector(picked, node)
    if selector is not None:
        result["nodeSelector"] = selector
    return result


def _covers_every_request(
    names: Sequence[str], claim: ClaimInfo, selected_subrequests: Mapping[int, RequestSpec]
) -> bool:
    for r, req in enumerate(claim.requests):
        if req.name in names:
            continue
        sub = selected_subrequests.get(r)
        if sub is not None and sub.full_name in names:
            continue
        return False
    return True


def _body(cfg: DeviceClassConfiguration | DeviceClaimConfiguration) -> dict[str, Any]:
    """The configuration itself (``opaque``, and fields of newer servers), as results copy it."""
    return {k: v for k, v in cfg.to_dict().items() if k not in ("requests", "source")}


def result_node_selector(picked: Sequence[PickedDevice], node: NodeInfo) -> dict[str, Any] | None:
    """Where the allocated devices can be used: one node, a merged selector, or anywhere."""
    fields: list[NodeSelectorRequirement] = []
    exprs: list[NodeSelectorRequirement] = []
    for p in picked:
        dev = p.device
        slc = dev.slice
        if slc.per_device_node_selection:
            node_name, selector = dev.node_name, dev.node_selector
        else:
            node_name, selector = slc.node_name, slc.node_selector
        if node_name or dev.binds_to_node:
            return node_name_selector(node.name)
        if selector is None:
            continue
        terms = selector.node_selector_terms
        if len(terms) == 0:
            continue
        if len(terms) > 1:
            raise AllocationError(
                f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms",
                object_ref=slc.ref,
                field="spec.nodeSelector",
            )
        _merge(terms[0].match_fields or [], fields)
        _merge(terms[0].match_expressions or [], exprs)
    if not fields and not exprs:
        return None
    term: dict[str, Any] = {}
    if exprs:
        term["matchExpressions"] = [e.to_dict() for e in exprs]
    if fields:
        term["matchFields"] = [f.to_dict() for f in fields]
    return {"nodeSelectorTerms": [term]}


def _merge(new: Sequence[NodeSelectorRequirement], into: list[NodeSelectorRequirement]) -> None:
    for req in new:
        values = set(req.values or [])
        if not any(
            old.key == req.key and old.operator == req.operator and set(old.values or []) == values
            for old in into
        ):
            into.append(req)
