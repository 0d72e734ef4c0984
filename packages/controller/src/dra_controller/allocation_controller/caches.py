"""What the allocation controller's informers keep of each object.

At 1,000 nodes and 5,000 pods the caches are most of the controller's memory (see
``e2e/bench/bench_controller_memory.py``). Each collection is trimmed on arrival to what the
controller reads, and the repeated parts of an object are stored once:

- only pods not bound to a node are watched (``spec.nodeName=``): a bound pod can never be
  unschedulable again (a binding is never undone) and diagnosis reads pending pods only.
  The API server sends a pod's binding as its DELETED event, and none of the status
  updates of running pods (on a 5,000-pod cluster, most of the pod events there are). A
  pending pod keeps everything ``trim_pod`` keeps;
- a ResourceClaim loses ``status.reservedFor`` and bookkeeping metadata nothing reads;
- a Node keeps what the allocator's ``NodeInfo`` reads: name, labels, taints, allocatable;
- in every object, equal subtrees (a slice's devices repeat the same attribute values,
  capacities and counters; a claim's allocation repeats its config) become one shared
  object (:func:`share_subtrees`). Cached objects are never mutated (the store's contract),
  so sharing cannot leak a change from one place to another.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dra_allocator.extended_resources import CLAIM_ANNOTATION as EXTENDED_RESOURCE_CLAIM_ANNOTATION
from dra_kube_client.informers.resources import (
    ALL_RESOURCES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    RawObject,
    Resource,
    object_head,
    strip_managed_fields,
    trim_pod,
)

#: Metadata a claim drops: never read (``metadata.ownerReferences`` is read only on claims
#: the scheduler made for extended resources, which keep it).
_CLAIM_METADATA_DROPPED = ("generateName", "creationTimestamp", "finalizers", "generation")
#: Metadata a node keeps (``NodeInfo`` reads the name and labels).
_NODE_METADATA = ("name", "uid", "resourceVersion", "labels", "deletionTimestamp")


def share_subtrees(obj: RawObject) -> RawObject:
    """``obj`` with each set of equal JSON subtrees (dicts, lists, strings) made one object.

    Only within ``obj``: a table shared between objects would keep the unique parts of
    deleted objects alive. The result is equal to ``obj``.
    """
    table: dict[object, object] = {}

    def walk(value: Any) -> tuple[object, Any]:
        # Returns (a hashable key equal for equal JSON values, the canonical value).
        if isinstance(value, dict):
            items = [(k, walk(v)) for k, v in value.items()]
            key: object = ("d", tuple((k, vk) for k, (vk, _) in items))
            if key not in table:
                table[key] = {k: v for k, (_, v) in items}
            return key, table[key]
        if isinstance(value, list):
            parts = [walk(v) for v in value]
            key = ("l", tuple(k for k, _ in parts))
            if key not in table:
                table[key] = [v for _, v in parts]
            return key, table[key]
        if isinstance(value, str):
            return value, table.setdefault(value, value)
        # Keyed with the type: True, 1 and 1.0 are equal in Python but not in JSON.
        return (type(value).__name__, value), value

    shared: RawObject = walk(obj)[1]
    return shared


def trim_node(obj: RawObject) -> RawObject:
    """A Node reduced to what the allocator's ``NodeInfo`` reads."""
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    out = object_head(obj, _NODE_METADATA)
    out["spec"] = {"taints": spec["taints"]} if "taints" in spec else {}
    out["status"] = {"allocatable": status["allocatable"]} if "allocatable" in status else {}
    return share_subtrees(out)


def trim_controller_pod(obj: RawObject) -> RawObject:
    """A pending pod as diagnosis reads it: what ``trim_pod`` keeps, equal parts shared."""
    return share_subtrees(trim_pod(obj))


def trim_slice(obj: RawObject) -> RawObject:
    """``strip_managed_fields``, then :func:`share_subtrees` (the allocator reads the rest)."""
    return share_subtrees(strip_managed_fields(obj))


def trim_claim(obj: RawObject) -> RawObject:
    """A claim less what nothing reads: managed fields, ``status.reservedFor``, bookkeeping
    metadata, and the owners of claims that are not the scheduler's extended-resource claims
    (only those are matched to their pod by owner)."""
    strip_managed_fields(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if k not in _CLAIM_METADATA_DROPPED}
        if (kept.get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
            kept.pop("ownerReferences", None)
        obj["metadata"] = kept
    status = obj.get("status")
    if isinstance(status, dict) and "reservedFor" in status:
        obj["status"] = {k: v for k, v in status.items() if k != "reservedFor"}
    return share_subtrees(obj)


_TRANSFORMS = {
    PODS.kind: trim_controller_pod,
    NODES.kind: trim_node,
    RESOURCE_SLICES.kind: trim_slice,
    RESOURCE_CLAIMS.kind: trim_claim,
}

#: Pods not yet bound to a node (the field is empty until the scheduler binds the pod).
PENDING_PODS = "spec.nodeName="

#: The collections the controller watches (``ALL_RESOURCES``; pods only those not bound),
#: trimmed as above.
CONTROLLER_RESOURCES: tuple[Resource, ...] = tuple(
    replace(
        r,
        transform=_TRANSFORMS.get(r.kind, r.transform),
        field_selector=PENDING_PODS if r.kind == PODS.kind else r.field_selector,
    )
    for r in ALL_RESOURCES
)
