"""4-node ComputeDomains in the scale workload: the domains, their pods, and the stand-ins of
a run without the driver.

Each domain (:func:`compute_domain`, ``numNodes`` 4) gets a Deployment of 4 pods
(:func:`domain_deployment`) on GB200 nodes, each pod with two claims: one IMEX channel from
the domain's channel template (``spec.channel.resourceClaimTemplate``) and one whole GPU.
A node publishes one ``channel-0`` (``compute-domain.nvidia.com``), so the 4 pods of a domain
land on 4 different GB200 nodes.

With the chart installed the ComputeDomain controller writes each channel template when it
sees the domain. Without it, the same template is written by the benchmark
(:func:`stand_in_channel_template`: the controller's own manifest code, for a made-up domain
UID) next to the chart's channel DeviceClass (:func:`channel_device_class`), so both runs
schedule the same pods with the same claims.

Pure: manifests in, manifests out.
"""

from __future__ import annotations

import uuid
from typing import Any

from dra_api_types import ComputeDomain
from dra_api_types.nvidia_v1beta1 import API_VERSION as NVIDIA_API_VERSION
from dra_computedomain.manifests import workload_claim_template
from dra_computedomain.names import DEFAULT_CHANNEL_CLASS

from dra_e2e.kwok import NODE_TYPE_LABEL, NODE_TYPE_VALUE, toleration
from dra_e2e.kwok_slices import FLEET_LABEL, GB200
from dra_e2e.scale_workload import APP_LABEL, WHOLE_GPU
from dra_e2e.versions import PAUSE_IMAGE

#: Nodes (and pods) per domain, as the issue asks.
DOMAIN_NODES = 4
#: Percent of the workload's pods that belong to domains (rounded down to whole domains).
DOMAIN_SHARE = 8
DOMAIN_PREFIX = "domain-"
CHANNEL_DRIVER = "compute-domain.nvidia.com"


def domain_count(pods: int, gb200_nodes: int) -> int:
    """How many 4-node domains a run of ``pods`` pods has: :data:`DOMAIN_SHARE` percent of
    its pods, and at most half the GB200 nodes busy with domains, so a churn that deletes
    GB200 nodes leaves free channels for the pods it displaces."""
    by_share = pods * DOMAIN_SHARE // 100 // DOMAIN_NODES
    by_nodes = gb200_nodes // 2 // DOMAIN_NODES
    return max(0, min(by_share, by_nodes))


def domain_name(index: int) -> str:
    """The name of domain ``index`` (also its Deployment's)."""
    return f"{DOMAIN_PREFIX}{index}"


def channel_template_name(index: int) -> str:
    """The name of domain ``index``'s channel ResourceClaimTemplate."""
    return f"{domain_name(index)}-channel"


def compute_domain(index: int, namespace: str) -> dict[str, Any]:
    """Domain ``index``: :data:`DOMAIN_NODES` nodes, its channel template named after it."""
    return {
        "apiVersion": NVIDIA_API_VERSION,
        "kind": "ComputeDomain",
        "metadata": {"name": domain_name(index), "namespace": namespace},
        "spec": {
            "numNodes": DOMAIN_NODES,
            "channel": {"resourceClaimTemplate": {"name": channel_template_name(index)}},
        },
    }


def stand_in_channel_template(index: int, namespace: str) -> dict[str, Any]:
    """The channel template the controller would write for domain ``index``, for a run
    without the driver (the domain's UID made up; the finalizer left off, since no
    controller would remove it)."""
    domain = ComputeDomain.from_dict(compute_domain(index, namespace))
    domain.metadata.uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{domain_name(index)}"))
    template = workload_claim_template(domain)
    template["metadata"].pop("finalizers", None)
    return template


def channel_device_class() -> dict[str, Any]:
    """The chart's default channel DeviceClass (same name and selector), for a run without
    the chart."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DEFAULT_CHANNEL_CLASS},
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": f"device.driver == '{CHANNEL_DRIVER}' && "
                        f"device.attributes['{CHANNEL_DRIVER}'].type == 'channel' && "
                        f"device.attributes['{CHANNEL_DRIVER}'].id == 0"
                    }
                }
            ]
        },
    }


def domain_deployment(index: int, namespace: str, replicas: int) -> dict[str, Any]:
    """Domain ``index``'s pods on GB200 nodes: a channel of the domain and a whole GPU each."""
    labels = {APP_LABEL: domain_name(index)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": domain_name(index), "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {NODE_TYPE_LABEL: NODE_TYPE_VALUE, FLEET_LABEL: GB200.name},
                    "tolerations": [toleration()],
                    "terminationGracePeriodSeconds": 0,
                    "resourceClaims": [
                        {
                            "name": "channel",
                            "resourceClaimTemplateName": channel_template_name(index),
                        },
                        {"name": "gpu", "resourceClaimTemplateName": WHOLE_GPU.name},
                    ],
                    "containers": [
                        {
                            "name": "work",
                            "image": PAUSE_IMAGE,
                            "resources": {"claims": [{"name": "channel"}, {"name": "gpu"}]},
                        }
                    ],
                },
            },
        },
    }
