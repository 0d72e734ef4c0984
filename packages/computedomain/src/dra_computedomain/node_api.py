"""What the compute-domain kubelet plugin reads and writes on the API server (kube edge).

The domains (found by UID in a :class:`~.domain_cache.DomainCache`: claims name their domain
by UID only, and a lookup must not list the cluster's domains), this node's clique object
of a domain, and the node's domain label, which is set and removed with a JSON-patch ``test``
so a label another prepare or the controller changed meanwhile is never overwritten.
"""

from __future__ import annotations

import logging
from typing import Final

from dra_api_types import ComputeDomain, ComputeDomainClique
from dra_kube_client import JsonTransport, KubeApiError

from .api_paths import Permission, node_path, object_path
from .domain_cache import DomainCache
from .names import COMPUTE_DOMAIN_LABEL, GPU_CLIQUE_LABEL, clique_object_name

__all__ = ["NODE_LABELS", "REQUESTS", "NodeApi"]

log = logging.getLogger(__name__)

#: What the compute-domain plugin asks of the API server (added to the plugin's ClusterRole).
REQUESTS: Final[frozenset[Permission]] = frozenset(
    {
        ("resource.nvidia.com", "computedomains", "list"),
        ("resource.nvidia.com", "computedomains", "watch"),
        ("resource.nvidia.com", "computedomaincliques", "get"),
        ("", "nodes", "get"),
        ("", "nodes", "patch"),
    }
)
#: The Node label keys the plugin writes, and all it may change on its Node: the chart's admission
#: policy (``validatingadmissionpolicy-nodes.yaml``) denies the plugin any other change.
NODE_LABELS: Final[frozenset[str]] = frozenset({COMPUTE_DOMAIN_LABEL, GPU_CLIQUE_LABEL})
_LABEL_PATH: Final = "/metadata/labels/" + COMPUTE_DOMAIN_LABEL.replace("/", "~1")


class NodeApi:
    """The API objects of one node's compute-domain plugin."""

    def __init__(
        self,
        transport: JsonTransport,
        *,
        node_name: str,
        driver_namespace: str,
        domains: DomainCache,
    ) -> None:
        """Cliques are read from ``driver_namespace``, domains from ``domains`` (which the
        plugin starts)."""
        self._transport = transport
        self.domains = domains
        self.node_name = node_name
        #: where the controller runs the domain daemons (their claims and cliques live there)
        self.driver_namespace = driver_namespace

    def domain(self, uid: str) -> ComputeDomain | None:
        """The ComputeDomain with ``uid``, or None (a cache lookup, see :class:`DomainCache`).

        Raises:
            KubeApiError: the domains have not been listed yet.
        """
        return self.domains.get(uid)

    def cliques(self, domain_uid: str, clique_id: str) -> list[ComputeDomainClique]:
        """This node's clique object of the domain (none yet: empty)."""
        name = clique_object_name(domain_uid, clique_id)
        path = object_path("ComputeDomainClique", self.driver_namespace, name)
        try:
            return [ComputeDomainClique.from_dict(self._transport.request("GET", path))]
        except KubeApiError as exc:
            if exc.status == 404:
                return []
            raise

    def node_label(self) -> tuple[str | None, str]:
        """The node's domain label (None without) and its resourceVersion."""
        node = self._transport.request("GET", node_path(self.node_name))
        meta = node.get("metadata") or {}
        label = (meta.get("labels") or {}).get(COMPUTE_DOMAIN_LABEL)
        return label, str(meta.get("resourceVersion", ""))

    def set_label(self, domain_uid: str, resource_version: str) -> None:
        """Label the node for ``domain_uid`` if it is unchanged since ``resource_version``."""
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
            {"op": "add", "path": _LABEL_PATH, "value": domain_uid},
        ]
        self._transport.request(
            "PATCH",
            node_path(self.node_name),
            body=patch,
            content_type="application/json-patch+json",
        )
        log.info("node labelled", extra={"event": "node_labelled", "domain_uid": domain_uid})

    def remove_label(self, domain_uid: str) -> None:
        """Remove the node's label if it still names ``domain_uid``."""
        patch = [
            {"op": "test", "path": _LABEL_PATH, "value": domain_uid},
            {"op": "remove", "path": _LABEL_PATH},
        ]
        try:
            self._transport.request(
                "PATCH",
                node_path(self.node_name),
                body=patch,
                content_type="application/json-patch+json",
            )
        except KubeApiError as exc:
            if exc.status in (404, 422):  # node gone, or the label is not (or no longer) ours
                return
            raise
        log.info("node unlabelled", extra={"event": "node_unlabelled", "domain_uid": domain_uid})

    def set_clique_label(self, clique_id: str) -> None:
        """Put the node's clique ID in its ``nvidia.com/gpu.clique`` label (NVIDIA's, replacing
        GFD's); a node without a clique loses the label (a stale one would attract pods)."""
        patch = {"metadata": {"labels": {GPU_CLIQUE_LABEL: clique_id or None}}}
        self._transport.request(
            "PATCH",
            node_path(self.node_name),
            body=patch,
            content_type="application/merge-patch+json",
        )
        log.info(
            "clique label set" if clique_id else "clique label removed",
            extra={"event": "clique_label", "label": GPU_CLIQUE_LABEL, "clique_id": clique_id},
        )
