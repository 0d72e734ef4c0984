"""The objects ``kubectl dra explain`` reads from a live cluster, as documents.

Requests go through :mod:`dra_kube_client`; responses are read as raw JSON and parsed
leniently like everything else. The lists themselves are asked for by
:mod:`kubectl_dra.cluster_lists`, before this module (and the allocator) is imported.
"""

from __future__ import annotations

import logging

from dra_allocator.explain_report import not_found
from dra_allocator.inputs import Document
from dra_kube_client import JsonTransport, KubeApiError
from dra_kube_client.informers.resources import strip_managed_fields

from .cluster_lists import ClusterLists, LiveClusterError

log = logging.getLogger(__name__)


def cluster_documents(lists: ClusterLists, *, namespace: str, pod: str | None) -> list[Document]:
    """Classes, slices, all claims and claim templates, DeviceTaintRules and nodes from
    ``lists``, and the pod if asked.

    The lists were asked for together: at 1,000 nodes, fetching them one after another
    was most of explain's time, and together the server builds them side by side while
    this process reads the first. Documents, logs and the error raised are in the lists'
    order.

    Each object's ``managedFields`` are dropped as it arrives: explain never reads them,
    and every claim carries some (its creator's and the scheduler's), which reading the
    claims into models would otherwise parse too.

    Raises:
        LiveClusterError: a request refused or the server unreachable.
    """
    docs: list[Document] = []
    for path, api_version, kind, body in lists.replies():
        log.info("fetched path=%s items=%d", path, len(body.get("items") or []))
        for i, item in enumerate(body.get("items") or []):
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            docs.append(Document(source=path, index=i, data=strip_managed_fields(item)))
    if pod:
        docs.append(_pod_document(lists, namespace, pod))
    return docs


def fetch_with(
    transport: JsonTransport, *, namespace: str, pod: str | None, server: str = ""
) -> list[Document]:
    """:func:`cluster_documents` of lists asked for now through ``transport`` (``server``
    names it in errors)."""
    return cluster_documents(ClusterLists(transport, server=server), namespace=namespace, pod=pod)


def _pod_document(lists: ClusterLists, namespace: str, name: str) -> Document:
    transport = lists.transport
    try:
        body = transport.request("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    except KubeApiError as exc:
        if exc.status == 404:
            where = _pod_namespaces(transport, name)
            raise LiveClusterError(f"Pod {namespace}/{name}: {not_found(where)}") from exc
        raise lists.error(exc) from exc
    body.setdefault("apiVersion", "v1")
    body.setdefault("kind", "Pod")
    return Document(source=f"pod {namespace}/{name}", index=0, data=strip_managed_fields(body))


def _pod_namespaces(transport: JsonTransport, name: str) -> list[str]:
    """The namespaces that have a pod called ``name`` ([] when they cannot be listed)."""
    try:
        body = transport.request(
            "GET", "/api/v1/pods", query={"fieldSelector": f"metadata.name={name}"}
        )
    except KubeApiError as exc:  # e.g. not allowed to list pods cluster-wide: say no more
        log.info("cannot list pods named %s: %s", name, exc)
        return []
    return [
        (item.get("metadata") or {}).get("namespace") or "default"
        for item in body.get("items") or []
    ]
