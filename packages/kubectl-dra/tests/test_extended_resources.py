"""Extended resources backed by DRA (``nvidia.com/gpu: N``): naming, plans, allocate, explain."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from api_types_fixtures import DEMO_SPECS
from dra_allocator.extended_resources import (
    class_mapping,
    is_extended_resource,
    plan_node,
    pod_extended_requests,
)
from dra_allocator.model import parse_class
from dra_allocator.nodes import NodeInfo
from dra_api_types import DeviceClass, Pod
from dra_api_types import testing as builders

FIXTURES = Path(__file__).parent / "fixtures"
EXT = FIXTURES / "extended"
SCRIPT = Path(sys.executable).with_name("kubectl-dra")
CLUSTER = [str(EXT / "classes.yaml"), str(EXT / "slices-8xh100.yaml")]


def kubectl_dra(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed console script."""
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False
    )


def device_class(name: str, extended: str | None = None, stamp: str = "") -> Any:
    """A parsed DeviceClass."""
    return parse_class(
        DeviceClass.from_dict(
            builders.device_class(
                name,
                selectors=["true"],
                extended_resource_name=extended or None,
                creation_timestamp=stamp or None,
            )
        )
    )


def gpu_pod(limits: dict[str, Any], *, init: bool = False, node: str = "") -> Pod:
    """A device-plugin style pod (bound to ``node`` if given)."""
    obj = builders.pod(
        "p", namespace="ns", containers=[{"name": "main", "resources": {"limits": limits}}]
    )
    if init:
        obj["spec"]["initContainers"] = [{"name": "setup"}]
    if node:
        obj["spec"]["nodeName"] = node
    return Pod.from_dict(obj)


def test_mapping_has_implicit_names_and_the_newest_explicit_class_wins() -> None:
    mapping = class_mapping(
        [
            device_class("old", "nvidia.com/gpu", "2026-01-01T00:00:00Z"),
            device_class("new", "nvidia.com/gpu", "2026-06-01T00:00:00Z"),
            device_class("plain"),
        ]
    )
    assert mapping == {
        "deviceclass.resource.kubernetes.io/old": "old",
        "deviceclass.resource.kubernetes.io/new": "new",
        "deviceclass.resource.kubernetes.io/plain": "plain",
        "nvidia.com/gpu": "new",
    }


def test_extended_resource_names() -> None:
    assert is_extended_resource("nvidia.com/gpu")
    assert is_extended_resource("deviceclass.resource.kubernetes.io/gpu.nvidia.com")
    for native in ("cpu", "memory", "hugepages-2Mi", "kubernetes.io/batch-cpu"):
        assert not is_extended_resource(native)


def test_requests_are_named_by_container_index_and_sorted_resource_index() -> None:
    pod = gpu_pod({"cpu": "1", "nvidia.com/gpu": 2, "example.com/fpga": 0}, init=True)
    (req,) = pod_extended_requests(pod)
    # init containers come first; cpu < example.com/fpga < nvidia.com/gpu.
    assert (req.request_name, req.container, req.resource, req.count) == (
        "container-1-request-2",
        "main",
        "nvidia.com/gpu",
        2,
    )


def test_node_allocatable_means_the_device_plugin_serves_it() -> None:
    pod = gpu_pod({"nvidia.com/gpu": 2})
    requests = pod_extended_requests(pod)
    mapping = {"nvidia.com/gpu": "gpu.nvidia.com"}
    plugin = plan_node(pod, requests, mapping, NodeInfo("a", allocatable={"nvidia.com/gpu": "4"}))
    assert (plugin.device_plugin, plugin.dra, plugin.unfit) == (["nvidia.com/gpu"], [], [])
    dra = plan_node(pod, requests, mapping, NodeInfo("b"))
    assert [(r.request_name, cls) for r, cls in dra.dra] == [
        ("container-0-request-0", "gpu.nvidia.com")
    ]
    busy = gpu_pod({"nvidia.com/gpu": 3}, node="a")
    full = plan_node(
        pod,
        requests,
        mapping,
        NodeInfo("a", allocatable={"nvidia.com/gpu": "4"}),
        bound_pods=[busy],
    )
    assert full.unfit == [
        "Insufficient nvidia.com/gpu: the device plugin of node a has 1 of 4 free, the pod needs 2"
    ]
    unmapped = plan_node(pod, requests, {}, NodeInfo("b"))
    assert unmapped.unfit
    assert "no DeviceClass sets extendedResourceName" in unmapped.unfit[0]


def test_allocate_serves_unmodified_device_plugin_pods_through_dra() -> None:
    proc = kubectl_dra("allocate", "-f", *CLUSTER, str(EXT / "pods.yaml"), "-o", "json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["pods"] == {
        "team-a/one-gpu": {
            "allocated": True,
            "node": "node-dra",
            "extendedResourceClaimStatus": {
                "resourceClaimName": "one-gpu-extended-resources",
                "requestMappings": [
                    {
                        "containerName": "main",
                        "requestName": "container-0-request-1",
                        "resourceName": "nvidia.com/gpu",
                    }
                ],
            },
        },
        "team-a/two-gpus": {
            "allocated": True,
            "node": "node-dra",
            "extendedResourceClaimStatus": {
                "resourceClaimName": "two-gpus-extended-resources",
                "requestMappings": [
                    {
                        "containerName": "main",
                        "requestName": "container-1-request-0",
                        "resourceName": "nvidia.com/gpu",
                    }
                ],
            },
        },
    }
    devices = {
        key: [r["device"] for r in c["allocation"]["devices"]["results"]]
        for key, c in report["claims"].items()
    }
    # The second pod sees the first pod's GPU as held.
    assert devices == {
        "team-a/one-gpu-extended-resources": ["gpu-0"],
        "team-a/two-gpus-extended-resources": ["gpu-1", "gpu-2"],
    }


def test_a_device_plugin_node_serves_the_pod_without_a_claim() -> None:
    proc = kubectl_dra(
        "allocate", "-f", *CLUSTER, str(EXT / "pods.yaml"), str(EXT / "device-plugin-node.yaml"),
        "--node", "node-plugin", "-o", "json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["claims"] == {}
    assert report["pods"]["team-a/one-gpu"] == {
        "allocated": True,
        "node": "node-plugin",
        "devicePlugin": ["nvidia.com/gpu"],
    }


def test_more_gpus_than_a_node_has_stay_pending_and_explain_says_why() -> None:
    files = [*CLUSTER, str(EXT / "too-many.yaml"), str(EXT / "device-plugin-node.yaml")]
    proc = kubectl_dra("allocate", "-f", *files, "-o", "json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["pods"]["team-a/nine-gpus"] == {
        "allocated": False,
        "reasons": [
            "node node-plugin: Insufficient nvidia.com/gpu: the device plugin of node "
            "node-plugin has 4 of 4 free, the pod needs 9",
            "claim team-a/nine-gpus-extended-resources: node node-dra: request "
            "container-0-request-0: needs 9 device(s) of class gpu.nvidia.com, 8 usable",
        ],
    }
    text = kubectl_dra("explain", "pod/nine-gpus", "-n", "team-a", "-f", *files)
    assert text.returncode == 1, text.stderr
    assert text.stdout.splitlines() == [
        "Pod team-a/nine-gpus: pending; extended resources:",
        "  container main: nvidia.com/gpu: 9 -> DeviceClass gpu.nvidia.com, request "
        "container-0-request-0 of the claim the scheduler creates "
        "(team-a/nine-gpus-extended-resources-<suffix>)",
        "  does not fit on node node-plugin: Insufficient nvidia.com/gpu: the device plugin "
        "of node node-plugin has 4 of 4 free, the pod needs 9",
        "ResourceClaim team-a/nine-gpus-extended-resources: pending",
        "  fits on no node",
        "  request container-0-request-0: needs 9 device(s) of class gpu.nvidia.com; "
        "best node node-dra has 8 usable",
        "  does not fit on 1 node(s) (node-dra):",
        "    - request container-0-request-0: needs 9 device(s) of class gpu.nvidia.com, 8 usable",
    ]


def test_explain_a_scheduled_pod_shows_the_schedulers_claim() -> None:
    pod = gpu_pod({"nvidia.com/gpu": 1}, node="node-dra").to_dict()
    pod["status"] = {
        "extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-x1"}
    }
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "p-extended-resources-x1", "namespace": "ns"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "container-0-request-0",
                        "exactly": {"deviceClassName": "gpu.nvidia.com"},
                    }
                ]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "container-0-request-0",
                            "driver": "gpu.nvidia.com",
                            "pool": "node-dra",
                            "device": "gpu-3",
                        }
                    ]
                }
            }
        },
    }
    listing = json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod, claim]})
    proc = subprocess.run(
        [str(SCRIPT), "explain", "pod/p", "-n", "ns", "-f", *CLUSTER, "-"],
        input=listing, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (
        "ResourceClaim ns/p-extended-resources-x1: allocated "
        "(container-0-request-0: gpu.nvidia.com/node-dra/gpu-3)\n"
    )


def test_nvidia_gpu_full_spec_allocates_offline() -> None:
    proc = kubectl_dra(
        "allocate",
        "-f",
        *CLUSTER,
        str(DEMO_SPECS / "extended-resources_gpu-full.yaml"),
        "-o",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    status = report["pods"]["extended-resource-gpu-full/gpu-full-pod"][
        "extendedResourceClaimStatus"
    ]
    assert status["requestMappings"] == [
        {
            "containerName": "cuda-container",
            "requestName": "container-0-request-0",
            "resourceName": "nvidia.com/gpu",
        }
    ]


def test_nvidia_mig_spec_maps_its_own_extended_resource_to_its_class() -> None:
    spec = str(DEMO_SPECS / "extended-resources_mig-1g-12gb.yaml")
    proc = kubectl_dra(
        "allocate", "-f", *CLUSTER, str(EXT / "slice-gh200-mig.yaml"), spec, "-o", "json"
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    pod = report["pods"]["extended-resource-mig-1g12gb/mig-1g12gb-pod"]
    assert pod["node"] == "node-gh200"
    key = "extended-resource-mig-1g12gb/mig-1g12gb-pod-extended-resources"
    (result,) = report["claims"][key]["allocation"]["devices"]["results"]
    assert result["device"] == "gpu-0-mig-1g12gb-19-0"
    assert result["request"] == "container-0-request-0"
