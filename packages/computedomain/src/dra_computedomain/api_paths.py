"""REST paths of the kinds the ComputeDomain components read and write."""

from __future__ import annotations

from typing import Final

from dra_kubelet_plugin.kube import path_segment

__all__ = ["KIND_PATHS", "collection_path", "node_path", "object_path"]

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
}


def collection_path(kind: str, namespace: str | None = None) -> str:
    """The collection of ``kind``, in ``namespace`` or across all namespaces."""
    prefix, plural = KIND_PATHS[kind]
    if namespace is None:
        return f"{prefix}/{plural}"
    return f"{prefix}/namespaces/{path_segment(namespace)}/{plural}"


def object_path(kind: str, namespace: str, name: str) -> str:
    """One namespaced object of ``kind``."""
    return f"{collection_path(kind, namespace)}/{path_segment(name)}"


def node_path(name: str) -> str:
    """One Node."""
    return f"/api/v1/nodes/{path_segment(name)}"
