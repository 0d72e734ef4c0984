"""The API collections the allocation controller watches, and how each is trimmed."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

RawObject = dict[str, Any]


def strip_managed_fields(obj: RawObject) -> RawObject:
    """Drop ``metadata.managedFields`` (and kubectl's last-applied copy): large, and never
    read by the controller or ``kubectl dra``."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        (meta.get("annotations") or {}).pop(
            "kubectl.kubernetes.io/last-applied-configuration", None
        )
    return obj


def object_head(obj: RawObject, metadata_keys: Iterable[str]) -> RawObject:
    """A new object of ``obj``'s apiVersion and kind with only ``metadata_keys`` of its
    metadata: the start of every trimmed cache entry (the caller adds what else it reads)."""
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": obj.get("apiVersion"),
        "kind": obj.get("kind"),
        "metadata": {k: meta[k] for k in metadata_keys if k in meta},
    }


def metadata_only(obj: RawObject) -> RawObject:
    """Only what identifies the object and its version: for informers that only wake
    someone on a change (client-go's metadata informers), so their cache stays small."""
    return object_head(obj, ("name", "namespace", "uid", "resourceVersion"))


_POD_SPEC_KEEP = (
    "nodeName",
    "nodeSelector",
    "affinity",
    "tolerations",
    "resourceClaims",
    "containers",
    "initContainers",
    "schedulerName",
)


def trim_pod(obj: RawObject) -> RawObject:
    """A pod reduced to what diagnosis reads: claims, placement, resources, conditions.

    Pods are the largest and most numerous objects watched; keeping the rest (volumes,
    env, probes) would make memory grow with everything users put in their pods.
    """
    strip_managed_fields(obj)
    spec = obj.get("spec") or {}
    kept = {k: spec[k] for k in _POD_SPEC_KEEP if k in spec}
    for key in ("containers", "initContainers"):
        if key in kept:
            kept[key] = [
                {"name": c.get("name"), "resources": c.get("resources") or {}}
                for c in kept[key] or []
            ]
    status = obj.get("status") or {}
    obj["spec"] = kept
    obj["status"] = {
        k: status[k]
        for k in ("phase", "conditions", "resourceClaimStatuses", "extendedResourceClaimStatus")
        if k in status
    }
    return obj


@dataclass(frozen=True, slots=True)
class Resource:
    """One watched collection: its list path and the kind its items get.

    ``label_selector`` and ``field_selector`` (API server syntax, e.g. ``app=x`` or
    ``spec.nodeName=n1``) narrow the collection; both the list and the watch send them.
    """

    kind: str
    api_version: str
    path: str
    transform: Callable[[RawObject], RawObject] = strip_managed_fields
    # Served only by some API servers: a 404 means "none", not "not synced yet".
    optional: bool = False
    label_selector: str = ""
    field_selector: str = ""

    @property
    def plural(self) -> str:
        """The last path segment (``resourceclaims``), the label of its metrics."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def selectors(self) -> dict[str, str]:
        """The selector part of a list or watch query (empty when none is set)."""
        query: dict[str, str] = {}
        if self.label_selector:
            query["labelSelector"] = self.label_selector
        if self.field_selector:
            query["fieldSelector"] = self.field_selector
        return query


RESOURCE_CLAIMS = Resource(
    "ResourceClaim", "resource.k8s.io/v1", "/apis/resource.k8s.io/v1/resourceclaims"
)
RESOURCE_SLICES = Resource(
    "ResourceSlice", "resource.k8s.io/v1", "/apis/resource.k8s.io/v1/resourceslices"
)
DEVICE_CLASSES = Resource(
    "DeviceClass", "resource.k8s.io/v1", "/apis/resource.k8s.io/v1/deviceclasses"
)
DEVICE_TAINT_RULES = Resource(
    "DeviceTaintRule",
    "resource.k8s.io/v1",
    "/apis/resource.k8s.io/v1/devicetaintrules",
    optional=True,
)
PODS = Resource("Pod", "v1", "/api/v1/pods", transform=trim_pod)
NODES = Resource("Node", "v1", "/api/v1/nodes")

#: Everything the controller caches, in the order it lists them at start.
ALL_RESOURCES = (DEVICE_CLASSES, DEVICE_TAINT_RULES, RESOURCE_SLICES, NODES, RESOURCE_CLAIMS, PODS)
