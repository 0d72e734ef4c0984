"""Fetching the objects ``kubectl dra explain`` needs from a live cluster.

Requests go through :mod:`dra_kube_client` (the ``kubernetes`` client as transport
only): responses are read as raw JSON and parsed leniently like everything else, because
its generated models reject fields newer than the client.
"""

from __future__ import annotations

import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dra_allocator.explain_report import not_found
from dra_allocator.inputs import Document
from dra_kube_client import JsonTransport, KubeApiError, KubeConfigError, KubeTransport
from dra_kube_client.informers.resources import strip_managed_fields

log = logging.getLogger(__name__)

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


_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)")


class LiveClusterError(Exception):
    """The cluster could not be reached or refused a request (one line, for stderr)."""


def fetch_documents(
    *, namespace: str, pod: str | None, kubeconfig: str | None, context: str | None
) -> list[Document]:
    """Classes, slices, all claims and claim templates, DeviceTaintRules, nodes, and the
    pod if asked.

    Raises:
        LiveClusterError: no usable kubeconfig, the server unreachable, or a request refused.
    """
    _check_kubeconfig(kubeconfig)
    try:
        transport = KubeTransport.from_kubeconfig(kubeconfig, context=context, in_cluster=False)
    except KubeConfigError as exc:
        reason = exc.message.removeprefix("cannot load: ")
        raise LiveClusterError(f"cannot load kubeconfig {exc.source}: {reason}") from exc
    return fetch_with(transport, namespace=namespace, pod=pod, server=transport.server)


def _check_kubeconfig(kubeconfig: str | None) -> None:
    """A missing kubeconfig named as such (the client says "Invalid kube-config file")."""
    if kubeconfig is not None:
        if not Path(kubeconfig).is_file():
            raise LiveClusterError(f"kubeconfig {kubeconfig} does not exist")
        return
    env = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if env:
        if not any(Path(p).is_file() for p in env):
            raise LiveClusterError(
                f"no kubeconfig: $KUBECONFIG names {', '.join(env)}, which does not exist; "
                "pass --kubeconfig FILE, or -f FILE to work offline"
            )
        return
    if not (Path.home() / ".kube" / "config").is_file():
        raise LiveClusterError(
            "no kubeconfig: --kubeconfig not given, $KUBECONFIG not set and ~/.kube/config "
            "does not exist; pass --kubeconfig FILE, or -f FILE to work offline"
        )


def _one_line(exc: KubeApiError, server: str) -> LiveClusterError:
    """A request's failure in one line: unreachable servers by their address and cause."""
    if exc.status == 0:
        m = _ERRNO.search(exc.message)
        cause = m.group(1).strip() if m else exc.message.splitlines()[0][:200]
        return LiveClusterError(f"cannot reach the API server {server}: {cause}")
    return LiveClusterError(str(exc).splitlines()[0])


def fetch_with(
    transport: JsonTransport, *, namespace: str, pod: str | None, server: str = ""
) -> list[Document]:
    """:func:`fetch_documents` through a given transport (``server`` names it in errors).

    The lists are asked for together (a transport serves requests from several threads,
    as the informers use it): at 1,000 nodes, fetching them one after another was most of
    explain's time, and together the server builds them side by side while this process
    reads the first. Documents, logs and the error raised are in the lists' order.

    Each object's ``managedFields`` are dropped as it arrives: explain never reads them,
    and every claim carries some (its creator's and the scheduler's), which reading the
    claims into models would otherwise parse too.
    """
    docs: list[Document] = []
    with ThreadPoolExecutor(max_workers=len(_LISTS), thread_name_prefix="list") as pool:
        replies = [pool.submit(transport.request, "GET", path) for path, _, _ in _LISTS]
        for (path, api_version, kind), reply in zip(_LISTS, replies, strict=True):
            try:
                body = reply.result()
            except KubeApiError as exc:
                if exc.status == 404 and kind in _OPTIONAL:
                    continue
                raise _one_line(exc, server or "(from the kubeconfig)") from exc
            log.info("fetched path=%s items=%d", path, len(body.get("items") or []))
            for i, item in enumerate(body.get("items") or []):
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", kind)
                docs.append(Document(source=path, index=i, data=strip_managed_fields(item)))
    if pod:
        try:
            body = transport.request("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}")
        except KubeApiError as exc:
            if exc.status == 404:
                where = _pod_namespaces(transport, pod)
                raise LiveClusterError(f"Pod {namespace}/{pod}: {not_found(where)}") from exc
            raise _one_line(exc, server or "(from the kubeconfig)") from exc
        body.setdefault("apiVersion", "v1")
        body.setdefault("kind", "Pod")
        docs.append(
            Document(source=f"pod {namespace}/{pod}", index=0, data=strip_managed_fields(body))
        )
    return docs


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
