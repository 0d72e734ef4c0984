"""Smoke tests of the cluster itself: node, pods, images, the DRA API and controllers.

They run against the session cluster (``e2e_cluster``): the local one, or the one
in $KUBECONFIG.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from dra_e2e.handle import ClusterHandle
from dra_e2e.versions import TEST_IMAGE

pytestmark = pytest.mark.e2e


def _ready(node: dict[str, Any]) -> bool:
    conditions = node["status"].get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def test_every_node_is_ready(e2e_cluster: ClusterHandle) -> None:
    nodes = e2e_cluster.kubectl_json("get", "nodes")["items"]
    assert nodes, "the cluster has no nodes"
    not_ready = [n["metadata"]["name"] for n in nodes if not _ready(n)]
    assert not_ready == []


def test_pod_from_local_image_runs_and_its_log_reads_back(
    e2e_cluster: ClusterHandle, e2e_namespace: str
) -> None:
    marker = f"hello-from-{uuid.uuid4().hex}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "echo", "namespace": e2e_namespace},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "echo",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["/bin/sh", "-c", f"echo {marker}; id -u"],
                }
            ],
        },
    }
    e2e_cluster.apply(json.dumps(pod))

    def succeeded() -> bool:
        phase = e2e_cluster.kubectl_json("get", "pod", "echo", "-n", e2e_namespace)["status"]
        assert phase.get("phase") != "Failed", phase
        return bool(phase.get("phase") == "Succeeded")

    e2e_cluster.wait_until("pod echo to succeed", succeeded, timeout=120)
    logs = e2e_cluster.kubectl("logs", "echo", "-n", e2e_namespace)
    assert logs.splitlines() == [marker, "0"]


def test_dra_api_is_served(e2e_cluster: ClusterHandle) -> None:
    versions = e2e_cluster.kubectl("api-versions").split()
    assert "resource.k8s.io/v1" in versions
    out = e2e_cluster.kubectl(
        "get", "deviceclasses,resourceslices,resourceclaims", "--all-namespaces", "-o", "name"
    )
    # A cluster without a driver may list nothing; what matters is that all three
    # resources resolved (kubectl fails on an unknown resource type).
    assert isinstance(out, str)
    kinds = e2e_cluster.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name")
    for resource in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates"):
        assert f"{resource}.resource.k8s.io" in kinds.split()
    if e2e_cluster.local is not None:
        # DeviceTaintRules are served: GA (v1) since 1.37; before, the local cluster turns
        # on every BETA DRA gate, including DRADeviceTaintRules (off by default in 1.36).
        assert "devicetaintrules.resource.k8s.io" in kinds.split()
        minor = int(e2e_cluster.local.kube_version.split(".")[1])
        if minor < 37:
            assert e2e_cluster.local.state.feature_gates.get("DRADeviceTaintRules") is True


@pytest.mark.parametrize("host_network", [False, True], ids=["pod-network", "host-network"])
def test_pods_reach_the_api_server_through_the_kubernetes_service(
    e2e_cluster: ClusterHandle, e2e_namespace: str, host_network: bool
) -> None:
    # What in-cluster clients (a DRA driver's pods) rely on: the ClusterIP in
    # KUBERNETES_SERVICE_HOST accepts connections on port 443.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "reach-api", "namespace": e2e_namespace},
        "spec": {
            "restartPolicy": "Never",
            "hostNetwork": host_network,
            "containers": [
                {
                    "name": "nc",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": [
                        "/bin/sh",
                        "-c",
                        "nc -w 5 $KUBERNETES_SERVICE_HOST $KUBERNETES_SERVICE_PORT </dev/null"
                        " && echo connected",
                    ],
                }
            ],
        },
    }
    e2e_cluster.apply(json.dumps(pod))

    def finished() -> str | None:
        phase = e2e_cluster.kubectl_json("get", "pod", "reach-api", "-n", e2e_namespace)
        value = phase["status"].get("phase")
        return str(value) if value in ("Succeeded", "Failed") else None

    phase = e2e_cluster.wait_until("pod reach-api to finish", finished, timeout=120)
    logs = e2e_cluster.kubectl("logs", "reach-api", "-n", e2e_namespace)
    assert (phase, logs.strip()) == ("Succeeded", "connected")


def _events_for(e2e_cluster: ClusterHandle, namespace: str, pod: str) -> list[dict[str, Any]]:
    events = e2e_cluster.kubectl_json(
        "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={pod}"
    )
    return list(events["items"])


def test_claim_template_yields_claim_and_pod_waits_for_a_driver(
    e2e_cluster: ClusterHandle, e2e_namespace: str
) -> None:
    driver = f"absent-{uuid.uuid4().hex[:8]}.e2e.example.com"
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": driver},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-device", "namespace": e2e_namespace},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": driver}}]}
            }
        },
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "wants-device", "namespace": e2e_namespace},
        "spec": {
            "resourceClaims": [{"name": "dev", "resourceClaimTemplateName": "one-device"}],
            "containers": [
                {
                    "name": "c",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["sleep", "3600"],
                    "resources": {"claims": [{"name": "dev"}]},
                }
            ],
        },
    }
    e2e_cluster.apply(json.dumps(device_class))
    try:
        e2e_cluster.apply(json.dumps(template))
        e2e_cluster.apply(json.dumps(pod))

        def generated_claim() -> dict[str, Any] | None:
            claims = e2e_cluster.kubectl_json("get", "resourceclaims", "-n", e2e_namespace)
            for claim in claims["items"]:
                owners = claim["metadata"].get("ownerReferences", [])
                if any(o["kind"] == "Pod" and o["name"] == "wants-device" for o in owners):
                    return dict(claim)
            return None

        claim = e2e_cluster.wait_until("the generated ResourceClaim", generated_claim, timeout=60)
        annotations = claim["metadata"].get("annotations", {})
        assert annotations.get("resource.kubernetes.io/pod-claim-name") == "dev"
        assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == driver
        assert "allocation" not in claim.get("status", {})

        def dra_unschedulable() -> str | None:
            for event in _events_for(e2e_cluster, e2e_namespace, "wants-device"):
                if event["reason"] == "FailedScheduling" and "claim" in event["message"]:
                    return str(event["message"])
            return None

        message = e2e_cluster.wait_until("a FailedScheduling event", dra_unschedulable, timeout=60)
        assert "cannot allocate all claims" in message
        status = e2e_cluster.kubectl_json("get", "pod", "wants-device", "-n", e2e_namespace)
        assert status["status"]["phase"] == "Pending"
        assert "nodeName" not in status["spec"]
        claim_statuses = status["status"].get("resourceClaimStatuses", [])
        assert claim_statuses == [{"name": "dev", "resourceClaimName": claim["metadata"]["name"]}]
    finally:
        e2e_cluster.kubectl("delete", "deviceclass", driver, "--wait=false")
