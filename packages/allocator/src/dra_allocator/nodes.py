"""Nodes and core/v1 NodeSelector matching (the subset DRA uses)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_api_types import NodeSelector, NodeSelectorRequirement

from .errors import AllocationError

RawObject = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class NodeTaint:
    """A node taint (``spec.taints[]``): pods must tolerate it to be placed there."""

    key: str
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A node as far as allocation cares: its name, labels, taints and allocatable resources.

    ``allocatable`` (``status.allocatable``, raw quantities) matters only for extended
    resources, which a device plugin serves on nodes that advertise them; ``taints`` only
    for the pod whose claims are allocated (the scheduler's TaintToleration filter).
    """

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[NodeTaint, ...] = ()
    allocatable: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, obj: RawObject) -> NodeInfo:
        """Build from a v1 Node object in JSON form."""
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise AllocationError("node without a name", object_ref="Node", field="metadata.name")
        labels = meta.get("labels") or {}
        taints = tuple(
            NodeTaint(
                key=str(t.get("key") or ""),
                value=str(t.get("value") or ""),
                effect=str(t.get("effect") or ""),
            )
            for t in (obj.get("spec") or {}).get("taints") or []
            if isinstance(t, Mapping)
        )
        allocatable = (obj.get("status") or {}).get("allocatable") or {}
        return cls(
            name=name,
            labels={str(k): str(v) for k, v in labels.items()},
            taints=taints,
            allocatable={str(k): str(v) for k, v in allocatable.items()},
        )


def node_selector_matches(selector: NodeSelector, node: NodeInfo, *, where: str) -> bool:
    """Whether a core/v1 NodeSelector selects the node (terms ORed, requirements ANDed)."""
    for term in selector.node_selector_terms:
        exprs = term.match_expressions or []
        flds = term.match_fields or []
        if not exprs and not flds:
            # An empty term selects nothing, as in the kube-scheduler's node affinity.
            continue
        if all(_requirement_matches(r, node.labels, where=where) for r in exprs) and all(
            _requirement_matches(r, {"metadata.name": node.name}, where=where, fields=True)
            for r in flds
        ):
            return True
    return False


def _requirement_matches(
    req: NodeSelectorRequirement, values: Mapping[str, str], *, where: str, fields: bool = False
) -> bool:
    key, op = req.key, req.operator
    wanted = list(req.values or [])
    if fields and key != "metadata.name":
        raise AllocationError(f"unsupported matchFields key {key!r}", field=where)
    present = key in values
    actual = values.get(key, "")
    if op == "In":
        return present and actual in wanted
    if op == "NotIn":
        return not present or actual not in wanted
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(wanted) != 1:
            return False
        try:
            have, bound = int(actual), int(wanted[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    raise AllocationError(f"unsupported node selector operator {op!r}", field=where)


def node_name_selector(node_name: str) -> dict[str, Any]:
    """The result node selector that pins an allocation to one node."""
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
        ]
    }
