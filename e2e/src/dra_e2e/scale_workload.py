"""The scale workload: claim templates and Deployments for simulated GPU nodes, and checks.

Pods ask for devices through ResourceClaimTemplates of three kinds (:data:`TEMPLATES`): a
whole GPU, a 1g MIG device, and a whole GPU with a time-slicing config. They are run as
Deployments (one per template, :func:`deployment`), so a deleted pod, or the pods of a deleted
node, come back through the ReplicaSet controller and get new claims. Every pod tolerates the
kwok taint and selects ``type=kwok``: the workload lands on simulated nodes only.

Everything here is pure: manifests in, manifests out; the checks read lists of objects.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_e2e.kwok import NODE_TYPE_LABEL, NODE_TYPE_VALUE, toleration
from dra_e2e.versions import PAUSE_IMAGE

DRIVER = "gpu.nvidia.com"
APP_LABEL = "dra-e2e/scale"


@dataclass(frozen=True)
class ClaimKind:
    """One ResourceClaimTemplate of the workload and its share of the pods (in percent)."""

    name: str
    device_class: str
    share: int
    selector: str = ""
    time_sliced: bool = False


WHOLE_GPU = ClaimKind("whole-gpu", "gpu.nvidia.com", 40)
MIG_1G = ClaimKind(
    "mig-1g", "mig.nvidia.com", 40, selector=f"device.attributes['{DRIVER}'].profile == '1g.5gb'"
)
TIME_SLICED = ClaimKind("time-sliced", "gpu.nvidia.com", 20, time_sliced=True)
TEMPLATES: tuple[ClaimKind, ...] = (WHOLE_GPU, MIG_1G, TIME_SLICED)


def device_classes() -> list[dict[str, Any]]:
    """The chart's GPU and MIG DeviceClasses (same names and selectors), for a cluster that
    runs the workload without the chart installed."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f"device.driver == '{DRIVER}' && "
                            f"device.attributes['{DRIVER}'].type == '{kind}'"
                        }
                    }
                ]
            },
        }
        for name, kind in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig"))
    ]


def claim_template(kind: ClaimKind, namespace: str) -> dict[str, Any]:
    """The ResourceClaimTemplate of ``kind``: one device of its class (and selector)."""
    exactly: dict[str, Any] = {"deviceClassName": kind.device_class, "allocationMode": "ExactCount"}
    if kind.selector:
        exactly["selectors"] = [{"cel": {"expression": kind.selector}}]
    spec: dict[str, Any] = {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}
    if kind.time_sliced:
        spec["devices"]["config"] = [
            {
                "requests": ["gpu"],
                "opaque": {
                    "driver": DRIVER,
                    "parameters": {
                        "apiVersion": "resource.nvidia.com/v1beta1",
                        "kind": "GpuConfig",
                        "sharing": {
                            "strategy": "TimeSlicing",
                            "timeSlicingConfig": {"interval": "Long"},
                        },
                    },
                },
            }
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": kind.name, "namespace": namespace},
        "spec": {"spec": spec},
    }


def pending_claim(namespace: str, gpus_per_node: int) -> dict[str, Any]:
    """``explain-pending``: a claim no node can satisfy (one GPU more than a node has), so it
    stays pending (what the benchmarks ask ``kubectl dra explain`` about)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "explain-pending", "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "count": gpus_per_node + 1,
                        },
                    }
                ]
            }
        },
    }


def replicas(total: int, kinds: Sequence[ClaimKind] = TEMPLATES) -> dict[str, int]:
    """``total`` pods split by the kinds' shares; the remainder goes to the first kinds."""
    weight = sum(k.share for k in kinds)
    counts = {k.name: total * k.share // weight for k in kinds}
    for kind in kinds[: total - sum(counts.values())]:
        counts[kind.name] += 1
    return counts


def deployment(kind: ClaimKind, namespace: str, count: int) -> dict[str, Any]:
    """``count`` pause pods on simulated nodes, each with its own claim from ``kind``."""
    labels = {APP_LABEL: kind.name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": kind.name, "namespace": namespace},
        "spec": {
            "replicas": count,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "nodeSelector": {NODE_TYPE_LABEL: NODE_TYPE_VALUE},
                    "tolerations": [toleration()],
                    "terminationGracePeriodSeconds": 0,
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": kind.name}],
                    "containers": [
                        {
                            "name": "work",
                            "image": PAUSE_IMAGE,
                            "resources": {"claims": [{"name": "gpu"}]},
                        }
                    ],
                },
            },
        },
    }


def workload(namespace: str, pods: int) -> list[dict[str, Any]]:
    """Every namespaced object of a run of ``pods`` pods: templates, then Deployments."""
    counts = replicas(pods)
    return [
        *(claim_template(k, namespace) for k in TEMPLATES),
        *(deployment(k, namespace, counts[k.name]) for k in TEMPLATES),
    ]


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """``(driver, pool, device)`` of every allocation result of ``claims``."""
    out: list[tuple[str, str, str]] = []
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            out.append((str(result["driver"]), str(result["pool"]), str(result["device"])))
    return out


def double_allocations(claims: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], int]:
    """Devices allocated to more than one claim, with how many (empty: none)."""
    return {d: n for d, n in Counter(allocated_devices(claims)).items() if n > 1}


def running_on_nodes(pods: Iterable[Mapping[str, Any]], nodes: set[str]) -> int:
    """How many ``pods`` are Running on one of ``nodes`` (and not being deleted)."""
    return sum(
        1
        for p in pods
        if (p.get("status") or {}).get("phase") == "Running"
        and (p.get("spec") or {}).get("nodeName") in nodes
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    )


def unallocated(claims: Iterable[Mapping[str, Any]]) -> list[str]:
    """Names of claims without an allocation."""
    return [
        str(c["metadata"]["name"]) for c in claims if not (c.get("status") or {}).get("allocation")
    ]
