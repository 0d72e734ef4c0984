"""Which ``resource.k8s.io`` version the API server speaks, found by discovery.

Kubernetes 1.34+ serves ``v1``; 1.33 ``v1beta2`` (and ``v1beta1``); 1.32 only ``v1beta1``.
The plugin works in v1 throughout: :class:`ResourceApi` is the version the server serves
(the first of ``v1``, ``v1beta2``, ``v1beta1`` it lists; request paths put it after
``/apis/resource.k8s.io/``), converts what the server returns to v1
(:mod:`dra_api_types.beta_to_v1`) and the slices the plugin writes from v1
(:mod:`dra_api_types.v1_to_beta`). :func:`pick_version` is pure; :func:`discover_resource_api`
is the one request (a discovery URL, which every authenticated client may read).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dra_api_types.beta_to_v1 import convert_to_v1
from dra_api_types.v1_to_beta import convert_slice_from_v1
from dra_kube_client import JsonTransport, KubeApiError

from dra_kubelet_core.errors import PluginError

__all__ = [
    "GROUP",
    "SUPPORTED_VERSIONS",
    "ResourceApi",
    "UnsupportedResourceApiError",
    "discover_resource_api",
    "pick_version",
]

GROUP = "resource.k8s.io"
#: In order of preference: the GA API first.
SUPPORTED_VERSIONS = ("v1", "v1beta2", "v1beta1")

log = logging.getLogger(__name__)


class UnsupportedResourceApiError(PluginError):
    """The API server serves no ``resource.k8s.io`` version this plugin speaks."""

    def __init__(self, served: list[str]) -> None:
        listed = ", ".join(served) if served else "none (is DynamicResourceAllocation on?)"
        super().__init__(
            f"the API server serves no {GROUP} version of {', '.join(SUPPORTED_VERSIONS)} "
            f"(it serves: {listed}); Kubernetes 1.32 or newer is needed"
        )
        self.served = served


def pick_version(group: Mapping[str, Any]) -> str:
    """The version to use from the ``APIGroup`` document of ``GET /apis/resource.k8s.io``.

    Raises:
        UnsupportedResourceApiError: none of :data:`SUPPORTED_VERSIONS` is served.
    """
    served = [
        str(v.get("version"))
        for v in group.get("versions") or []
        if isinstance(v, Mapping) and v.get("version")
    ]
    for version in SUPPORTED_VERSIONS:
        if version in served:
            return version
    raise UnsupportedResourceApiError(served)


@dataclass(frozen=True)
class ResourceApi:
    """Paths and conversions of one served ``resource.k8s.io`` version."""

    version: str = "v1"

    @property
    def api_version(self) -> str:
        """``resource.k8s.io/<version>``."""
        return f"{GROUP}/{self.version}"

    def to_v1(self, obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
        """A ResourceClaim or ResourceSlice the server returned, as v1 JSON.

        List items and watch objects carry no ``apiVersion``/``kind``; they are the served
        version's, so both are filled in before converting.
        """
        data = {**obj, "apiVersion": obj.get("apiVersion") or self.api_version}
        data.setdefault("kind", kind)
        if self.version == "v1" or data["apiVersion"] == f"{GROUP}/v1":
            return data
        return convert_to_v1(data)

    def slice_from_v1(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """A v1 ResourceSlice as the served version's JSON (the body of a write)."""
        if self.version == "v1":
            return dict(obj)
        return convert_slice_from_v1(obj, self.api_version)


def discover_resource_api(transport: JsonTransport) -> ResourceApi:
    """``GET /apis/resource.k8s.io`` and pick the version (see :func:`pick_version`).

    Raises:
        UnsupportedResourceApiError: the group is not served, or none of its versions is ours.
        KubeApiError: the server could not be asked.
    """
    try:
        group = transport.request("GET", "/apis/resource.k8s.io")
    except KubeApiError as exc:
        if exc.status == 404:
            raise UnsupportedResourceApiError([]) from exc
        raise
    api = ResourceApi(pick_version(group if isinstance(group, Mapping) else {}))
    log.info(
        "resource API version found by discovery",
        extra={"event": "resource_api_discovered", "version": api.api_version},
    )
    return api
