"""REST paths of the kinds the ComputeDomain components read and write."""

from __future__ import annotations

from typing import Final

from dra_kube_client import path_segment
from dra_kube_client.informers import Resource

__all__ = [
    "KIND_PATHS",
    "Permission",
    "collection_path",
    "collection_resource",
    "node_path",
    "object_path",
    "request_permission",
]

#: kind -> (API prefix, plural)
KIND_PATHS: Final[dict[str, tuple[str, str]]] = {
    "ComputeDomain": ("/apis/resource.nvidia.com/v1beta1", "computedomains"),
    "ComputeDomainClique": ("/apis/resource.nvidia.com/v1beta1", "computedomaincliques"),
    "DaemonSet": ("/apis/apps/v1", "daemonsets"),
    "ResourceClaimTemplate": ("/apis/resource.k8s.io/v1", "resourceclaimtemplates"),
    "ResourceClaim": ("/apis/resource.k8s.io/v1", "resourceclaims"),
    "Pod": ("/api/v1", "pods"),
    "Event": ("/api/v1", "events"),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases"),
    "Node": ("/api/v1", "nodes"),
}


def collection_path(kind: str, namespace: str | None = None) -> str:
    """The collection of ``kind``, in ``namespace`` or across all namespaces."""
    prefix, plural = KIND_PATHS[kind]
    if namespace is None:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{path_segment(namespace)}/{plural}"


def collection_resource(
    kind: str, namespace: str | None = None, *, label_selector: str = ""
) -> Resource:
    """The collection of ``kind`` as an informer watches it (see :func:`collection_path`)."""
    prefix, _ = KIND_PATHS[kind]
    api_version = prefix.removeprefix("/apis/").removeprefix("/api/")
    return Resource(
        kind, api_version, collection_path(kind, namespace), label_selector=label_selector
    )


def object_path(kind: str, namespace: str, name: str) -> str:
    """One namespaced object of ``kind``."""
    return f"{collection_path(kind, namespace)}/{path_segment(name)}"


def node_path(name: str) -> str:
    """One Node."""
    return f"/api/v1/nodes/{path_segment(name)}"


#: ``(api group, resource, verb)``: one RBAC permission.
Permission = tuple[str, str, str]

_VERBS: Final[dict[tuple[str, bool], str]] = {
    ("GET", True): "get",
    ("GET", False): "list",
    ("WATCH", False): "watch",
    ("POST", False): "create",
    ("PUT", True): "update",
    ("PATCH", True): "patch",
    ("DELETE", True): "delete",
    ("DELETE", False): "deletecollection",
}


def request_permission(method: str, path: str) -> Permission:
    """The permission the API server checks for ``method path`` (subresources as ``r/sub``).

    Components declare the permissions they use (``REQUESTS``); the chart grants exactly
    those, and unit tests check every recorded request against the declaration.
    """
    segments = path.split("?")[0].strip("/").split("/")
    if segments[0] == "api":
        group, rest = "", segments[2:]
    elif segments[0] == "apis":
        group, rest = segments[1], segments[3:]
    else:
        raise ValueError(f"{path}: not an API resource path")
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] if len(rest) < 3 else f"{rest[0]}/{rest[2]}"
    verb = _VERBS.get((method, len(rest) > 1))
    if verb is None:
        raise ValueError(f"{method} {path}: maps to no verb")
    return group, resource, verb
