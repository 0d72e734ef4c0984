"""Fetching the objects ``kubectl dra explain`` needs from a live cluster.

Requests go through :mod:`dra_kube_client` (the ``kubernetes`` client as transport
only): responses are read as raw JSON and parsed leniently like everything else, because
its generated models reject fields newer than the client.
"""

from __future__ import annotations

from dra_allocator.inputs import Document
from dra_kube_client import JsonTransport, KubeApiError, KubeConfigError, KubeTransport

_LISTS = [
    ("/apis/resource.k8s.io/v1/deviceclasses", "resource.k8s.io/v1", "DeviceClass"),
    ("/apis/resource.k8s.io/v1/resourceslices", "resource.k8s.io/v1", "ResourceSlice"),
    ("/apis/resource.k8s.io/v1/resourceclaims", "resource.k8s.io/v1", "ResourceClaim"),
    # A pod's claims the resourceclaim controller has not made yet are made from these.
    (
        "/apis/resource.k8s.io/v1/resourceclaimtemplates",
        "resource.k8s.io/v1",
        "ResourceClaimTemplate",
    ),
    ("/apis/resource.k8s.io/v1/devicetaintrules", "resource.k8s.io/v1", "DeviceTaintRule"),
    ("/api/v1/nodes", "v1", "Node"),
]
# Served only where the DeviceTaintRule API is on; without it there are no rules to apply.
_OPTIONAL = {"DeviceTaintRule"}


class LiveClusterError(Exception):
    """The cluster could not be reached or refused a request."""


def fetch_documents(*, namespace: str, pod: str | None, context: str | None) -> list[Document]:
    """Classes, slices, all claims and claim templates, DeviceTaintRules, nodes, and the
    pod if asked."""
    try:
        transport = KubeTransport.from_kubeconfig(context=context, in_cluster=False)
    except KubeConfigError as exc:
        raise LiveClusterError(f"cannot load kubeconfig: {exc.message}") from exc
    return fetch_with(transport, namespace=namespace, pod=pod)


def fetch_with(transport: JsonTransport, *, namespace: str, pod: str | None) -> list[Document]:
    """:func:`fetch_documents` through a given transport."""
    docs: list[Document] = []
    for path, api_version, kind in _LISTS:
        try:
            body = transport.request("GET", path)
        except KubeApiError as exc:
            if exc.status == 404 and kind in _OPTIONAL:
                continue
            raise LiveClusterError(str(exc)) from exc
        for i, item in enumerate(body.get("items") or []):
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            docs.append(Document(source=path, index=i, data=item))
    if pod:
        try:
            body = transport.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")
        except KubeApiError as exc:
            raise LiveClusterError(str(exc)) from exc
        body.setdefault("apiVersion", "v1")
        body.setdefault("kind", "Pod")
        docs.append(Document(source=f"pod {namespace}/{pod}", index=0, data=body))
    return docs
