"""Fetching the objects ``kubectl dra explain`` needs from a live cluster.

The ``kubernetes`` client is used only as transport (kubeconfig, TLS, auth): responses
are read as raw JSON and parsed leniently like everything else, because its generated
models reject fields newer than the client.
"""

from __future__ import annotations

import json
from typing import Any

from .inputs import Document

_LISTS = [
    ("/apis/resource.k8s.io/v1/deviceclasses", "resource.k8s.io/v1", "DeviceClass"),
    ("/apis/resource.k8s.io/v1/resourceslices", "resource.k8s.io/v1", "ResourceSlice"),
    ("/apis/resource.k8s.io/v1/resourceclaims", "resource.k8s.io/v1", "ResourceClaim"),
    ("/api/v1/nodes", "v1", "Node"),
]


class LiveClusterError(Exception):
    """The cluster could not be reached or refused a request."""


def fetch_documents(*, namespace: str, pod: str | None, context: str | None) -> list[Document]:
    """Classes, slices, all claims, nodes, and the pod if asked, as raw documents."""
    try:
        from kubernetes import client, config  # transport only
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise LiveClusterError("the kubernetes package is not installed") from exc
    try:
        config.load_kube_config(context=context)  # type: ignore[no-untyped-call]
    except Exception as exc:
        raise LiveClusterError(f"cannot load kubeconfig: {exc}") from exc
    api = client.ApiClient()
    docs: list[Document] = []

    def get(path: str) -> Any:
        """GET an API path and decode the JSON body."""
        try:
            params = api.param_serialize(
                "GET",
                path,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
            )
            resp = api.call_api(*params)
            data = resp.read()  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise LiveClusterError(f"GET {path}: {exc}") from exc
        if resp.status != 200:
            raise LiveClusterError(f"GET {path}: HTTP {resp.status}: {data[:300]!r}")
        return json.loads(data)

    for path, api_version, kind in _LISTS:
        body = get(path)
        for i, item in enumerate(body.get("items") or []):
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            docs.append(Document(source=path, index=i, data=item))
    if pod:
        body = get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
        body.setdefault("apiVersion", "v1")
        body.setdefault("kind", "Pod")
        docs.append(Document(source=f"pod {namespace}/{pod}", index=0, data=body))
    return docs
