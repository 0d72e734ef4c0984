"""ComputeDomain manifests and waits shared by the compute-domain and chaos e2e modules."""

from __future__ import annotations

import json
from typing import Any

from demo_specs import demo
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


#: The label the controller puts on every object of a domain (value: the domain's UID).
DOMAIN_LABEL = "resource.nvidia.com/computeDomain"


def nvidia_spec(name: str, namespace: str) -> str:
    """NVIDIA's demo spec ``name``, unchanged but for the namespace the test runs in."""
    return spec_in_namespace(demo(name), namespace)


def spec_in_namespace(text: str, namespace: str) -> str:
    """``text``'s objects placed in ``namespace`` (NVIDIA's specs use the default one)."""
    return text.replace("metadata:\n  name:", f"metadata:\n  namespace: {namespace}\n  name:")


def namespace_manifest(name: str) -> str:
    """A Namespace object."""
    return json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


def domain_events(cluster: ClusterHandle, namespace: str, name: str) -> str:
    """``REASON MESSAGE`` lines of the events about ``name`` in ``namespace``."""
    return cluster.kubectl(
        "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}",
        "-o", "custom-columns=R:.reason,M:.message", "--no-headers",
    )  # fmt: skip


def domain_leftovers(cluster: ClusterHandle, driver_namespace: str, uid: str) -> list[str]:
    """Everything still labelled with the domain's UID (DaemonSets, templates, cliques, nodes)."""
    found = []
    for kind, scope in (
        ("daemonsets", ["-n", driver_namespace]),
        ("resourceclaimtemplates", ["-A"]),
        ("computedomaincliques", ["-n", driver_namespace]),
        ("nodes", []),
    ):
        items = cluster.kubectl_json("get", kind, *scope, "-l", f"{DOMAIN_LABEL}={uid}")["items"]
        found += [f"{kind}/{i['metadata']['name']}" for i in items]
    return found


def domain_daemons(cluster: ClusterHandle, driver_namespace: str, uid: str) -> list[dict[str, Any]]:
    """The domain's daemon pods."""
    pods = cluster.kubectl_json(
        "get", "pods", "-n", driver_namespace, "-l", f"{DOMAIN_LABEL}={uid}"
    )
    return list(pods["items"])
