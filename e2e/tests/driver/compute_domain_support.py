"""ComputeDomain manifests and waits shared by the compute-domain and chaos e2e modules."""

from __future__ import annotations

import json
from typing import Any

from dra_e2e.handle import ClusterHandle


def domain_object(cluster: ClusterHandle, name: str, namespace: str) -> dict[str, Any]:
    """The ComputeDomain object."""
    return dict(cluster.kubectl_json("get", "computedomain", name, "-n", namespace))


def wait_ready(cluster: ClusterHandle, name: str, namespace: str, nodes: int) -> dict[str, Any]:
    """The ComputeDomain once Ready with at least ``nodes`` nodes."""

    def ready() -> bool:
        status = domain_object(cluster, name, namespace).get("status") or {}
        return status.get("status") == "Ready" and len(status.get("nodes") or []) >= nodes

    cluster.wait_until(f"ComputeDomain {namespace}/{name} Ready", ready, timeout=180, interval=2)
    return domain_object(cluster, name, namespace)


def cd_manifest(name: str, ns: str, *, num_nodes: int = 1) -> dict[str, Any]:
    """A ComputeDomain whose channel template has the domain's name."""
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"numNodes": num_nodes, "channel": {"resourceClaimTemplate": {"name": name}}},
    }


def worker_pod(
    name: str, ns: str, template: str | None, claim: str | None = None
) -> dict[str, Any]:
    """A pod holding a channel claim (from ``template``, or the claim named ``claim``)."""
    source = {"resourceClaimTemplateName": template} if template else {"resourceClaimName": claim}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "cd-worker"}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "ctr", "image": "ubuntu:22.04", "command": ["bash", "-c"],
                "args": ["ls /dev/nvidia-caps-imex-channels; trap 'exit 0' TERM; "
                         "sleep 9999 & wait"],
                "resources": {"claims": [{"name": "channel"}]},
            }],
            "resourceClaims": [{"name": "channel", **source}],
        },
    }  # fmt: skip


def as_list(*objects: dict[str, Any]) -> str:
    """A kubectl List of ``objects`` (applied in one call)."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
