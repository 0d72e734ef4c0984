"""A cluster snapshot built from manifests: the offline input of allocate and explain.

Workloads (Deployments, ReplicaSets, StatefulSets, Jobs, CronJobs) become the pods their
controllers would create (:mod:`.workloads`), and pods' ResourceClaimTemplate entries the
claims the resourceclaim controller would make (:mod:`.templates`); each made-up name is
said in :attr:`Snapshot.notes`. Pods get the ``spec.priority`` their PriorityClass gives
(:mod:`.priorities`), with a note where the class is not in the input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_api_types import Pod, ResourceClaimTemplate
from dra_api_types.beta_to_v1 import convert_to_v1, is_convertible_beta
from dra_api_types.driver_classes import driver_device_class
from dra_api_types.errors import ValidationError

from .claim_changes import ClaimChanges
from .claim_interning import ClaimInterner
from .errors import AllocationError
from .inputs import Document
from .model import ClaimInfo, ClassInfo, SliceInfo, parse_claim, parse_model, read_model
from .nodes import NodeInfo
from .plain_slices import read_plain_slice
from .pods import read_pod
from .priorities import PriorityClasses, is_priority_class, resolve_priorities
from .taint_rules import apply_taint_rules
from .templates import claims_from_templates
from .workloads import is_workload, workload_pods

RESOURCE_API = "resource.k8s.io/v1"
#: Each kind a snapshot holds: the Kubernetes kind, the snapshot's list of its objects, and
#: the type they are read as.
_FILING: tuple[tuple[str, str, type], ...] = (
    ("DeviceClass", "classes", ClassInfo),
    ("ResourceSlice", "slices", SliceInfo),
    ("ResourceClaim", "claims", ClaimInfo),
    ("Node", "nodes", NodeInfo),
    ("Pod", "pods", Pod),
)
_FIELD_OF_KIND = {kind: name for kind, name, _ in _FILING}


@dataclass(slots=True)
class Snapshot:
    """Classes, slices, claims, nodes and pods, parsed leniently (once, at the edge)."""

    classes: list[ClassInfo] = field(default_factory=list)
    slices: list[SliceInfo] = field(default_factory=list)
    claims: list[ClaimInfo] = field(default_factory=list)
    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    #: What the snapshot assumed that the input does not say (made-up names, chart classes).
    notes: list[str] = field(default_factory=list)
    #: Which claims differ from the source's snapshot before (None: not known).
    claim_changes: ClaimChanges | None = None

    def extend(self, kind: str, items: Iterable[Any]) -> None:
        """Add objects read from ``kind`` (``DeviceClass``, ``ResourceSlice``,
        ``ResourceClaim``, ``Node`` or ``Pod``) to their list, in order."""
        getattr(self, _FIELD_OF_KIND[kind]).extend(items)

    def claim(self, key: str) -> ClaimInfo | None:
        """Look up ``namespace/name``."""
        return next((c for c in self.claims if c.key == key), None)


def _as_v1(data: Mapping[str, Any], *, where: str) -> Mapping[str, Any]:
    """Beta DRA objects as the apiserver serves them in v1; other versions are an error.

    A claim, class or slice of an unserved version is never dropped silently: it would
    change what is allocated.
    """
    kind, api = data.get("kind"), str(data.get("apiVersion", ""))
    if is_convertible_beta(data):
        try:
            return convert_to_v1(data)
        except ValidationError as exc:
            raise AllocationError(
                f"cannot convert to {RESOURCE_API}: {exc}",
                object_ref=f"{where} {kind}",
                field=getattr(exc, "path", ""),
            ) from exc
    if (
        api.startswith("resource.k8s.io/")
        and api != RESOURCE_API
        and kind in ("DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate")
    ):
        raise AllocationError(
            f"{api} is not a version this tool reads (use {RESOURCE_API}, v1beta2 or v1beta1; "
            "kubectl dra migrate converts classic DRA objects)",
            object_ref=f"{where} {kind}",
            field="apiVersion",
        )
    return data


def read_object(
    data: Mapping[str, Any],
    *,
    where: str,
    taint_rules: Sequence[Mapping[str, Any]] = (),
    interner: ClaimInterner | None = None,
) -> ClassInfo | SliceInfo | ClaimInfo | NodeInfo | Pod | None:
    """One object as the allocator reads it: a ClassInfo, SliceInfo (with the DeviceTaintRules'
    taints), ClaimInfo or NodeInfo; a Pod's typed model; None for kinds nothing here reads.

    A claim shares the parts it has in common with claims read before through ``interner``.

    Raises:
        AllocationError: the object cannot be read (naming ``where`` and the field).
    """
    data = _as_v1(data, where=where)
    kind, api = data.get("kind"), data.get("apiVersion")
    if kind == "Node":
        return NodeInfo.from_dict(data)
    if kind == "Pod":
        return read_pod(data, where=f"{where} Pod")
    if api == RESOURCE_API and kind in ("DeviceClass", "ResourceSlice", "ResourceClaim"):
        if kind == "ResourceSlice":
            if taint_rules:
                data = apply_taint_rules(data, taint_rules)
            # Most slices are plain (names, attributes, capacities): read without models.
            plain = read_plain_slice(data)
            if plain is not None:
                return plain
        if interner is not None and kind == "ResourceClaim":
            return interner.read(data, where=f"{where} {kind}")
        return parse_model(read_model(data, where=f"{where} {kind}"))
    return None


def add_to_snapshot(snap: Snapshot, item: object) -> None:
    """File one :func:`read_object` result under its kind (nothing for other objects)."""
    kind = next((kind for kind, _, read_as in _FILING if isinstance(item, read_as)), None)
    if kind is not None:
        snap.extend(kind, (item,))


def is_taint_rule(data: object) -> bool:
    """Whether a raw document is a ``resource.k8s.io`` DeviceTaintRule."""
    return (
        isinstance(data, Mapping)
        and data.get("kind") == "DeviceTaintRule"
        and str(data.get("apiVersion", "")).startswith("resource.k8s.io/")
    )


def build_snapshot(docs: Sequence[Document]) -> Snapshot:
    """Sort documents by kind; objects other tools care about are ignored.

    Beta DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates are read as
    their v1 form. DeviceTaintRules (any ``resource.k8s.io`` version) add their taints to the
    slices' devices, as the kube-scheduler does. Workloads add their pods, and pods using
    ResourceClaimTemplates the claims made from them; PriorityClasses set the pods'
    ``spec.priority`` (see the module docstring).

    Raises:
        AllocationError: an object cannot be read (naming it and the field).
    """
    snap = Snapshot()
    rules = [doc.data for doc in docs if is_taint_rule(doc.data)]
    priority_classes = PriorityClasses.from_objects(
        [doc.data for doc in docs if is_priority_class(doc.data)]
    )
    templates: dict[str, ResourceClaimTemplate] = {}
    interner = ClaimInterner()
    for doc in docs:
        if not isinstance(doc.data, Mapping):
            raise AllocationError("document is not an object", object_ref=doc.where)
        if doc.data.get("kind") == "ResourceClaimTemplate":
            data = _as_v1(doc.data, where=doc.where)
            if data.get("apiVersion") == RESOURCE_API:
                where = f"{doc.where} ResourceClaimTemplate"
                template = read_model(data, where=where)
                if not isinstance(template, ResourceClaimTemplate):  # parse_object's dispatch
                    raise AllocationError(
                        "cannot parse: not a ResourceClaimTemplate", object_ref=where
                    )
                meta = template.metadata
                templates[f"{meta.namespace or 'default'}/{meta.name}"] = template
            continue
        if is_workload(doc.data):
            snap.pods.extend(workload_pods(doc.data))
            continue
        item = read_object(doc.data, where=doc.where, taint_rules=rules, interner=interner)
        add_to_snapshot(snap, item)
    add_template_claims(snap, templates)
    priorities = resolve_priorities(snap.pods, priority_classes)
    snap.pods = priorities.pods
    snap.notes.extend(priorities.notes)
    return snap


def add_template_claims(snap: Snapshot, templates: Mapping[str, ResourceClaimTemplate]) -> None:
    """Resolve the pods' ResourceClaimTemplate entries: claims made (or found) and recorded
    in the pods' ``status.resourceClaimStatuses``, one note per claim made.

    Raises:
        AllocationError: a pod names a template that is not in ``templates``.
    """
    made = claims_from_templates(snap.pods, templates, [c.obj for c in snap.claims])
    snap.pods = list(made.pods)
    for claim in made.claims:
        add_to_snapshot(snap, parse_claim(claim))
    snap.notes.extend(made.notes)


def add_driver_classes(snap: Snapshot) -> None:
    """Add the chart's DeviceClass for every class name a claim requests that the snapshot
    lacks and this driver installs (offline input without the chart), with a note each."""
    known = {c.name for c in snap.classes}
    wanted = [
        spec.class_name
        for claim in snap.claims
        for req in claim.requests
        for spec in ((req.exact,) if req.exact else ()) + req.first_available
    ]
    for name in dict.fromkeys(wanted):
        if name in known:
            continue
        chart_class = driver_device_class(name)
        if chart_class is None:
            continue
        add_to_snapshot(snap, read_object(chart_class, where="the driver's chart"))
        known.add(name)
        snap.notes.append(
            f"DeviceClass {name}: not in the input; using the one this driver's chart "
            "installs (kubectl dra classes prints it)"
        )
