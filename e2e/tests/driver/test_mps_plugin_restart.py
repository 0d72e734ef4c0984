"""MPS control daemons after the plugin container dies (issue #23, item 2).

NVIDIA's gpu-test-mps demo runs; the GPU plugin's container is then SIGKILLed through
containerd (``ctr tasks kill``: a real PID namespace, as a crash, OOM or liveness kill ends
it), and the kubelet starts it again. The claim's daemon runs in a Deployment of its own (the
chart's ``kubeletPlugin.mpsDaemonLauncher: deployment``), so it is not touched: the restarted
plugin finds it answering on its pipe and re-adopts it before it serves. The running pod keeps
its server (the same pid) with the claim's settings, the GPU stays in EXCLUSIVE_PROCESS, and a
new MPS client pod on the same claim starts and sees that server; deleting the claim's pods
deletes the daemon's Deployment."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from demo_specs import demo, namespaces_of
from dra_e2e.handle import ClusterHandle
from driver_support import (
    Driver,
    applied,
    as_json,
    install,
    kill_through_containerd,
    plugin_container,
    pod_claims,
    uninstall,
    wait_running,
)
from sharing_support import fake_gpu_state, running_pods

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

VALUES = {"featureGates.MPSSupport": "true"}
NS = "gpu-test-mps"
SERVER = "echo get_server_list | nvidia-cuda-mps-control"
THREADS = "echo get_default_active_thread_percentage | nvidia-cuda-mps-control"


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart with the MPS gate on."""
    installed = install(e2e_cluster, tmp_path_factory.mktemp("driver-images"), VALUES)
    yield installed
    uninstall(installed)


def _exec(cluster: ClusterHandle, pod: str, container: str, command: str) -> str:
    return cluster.kubectl("exec", pod, "-n", NS, "-c", container, "--", "sh", "-c", command)


def _client_pod(claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": NS, "name": "second-client"},
        "spec": {
            "containers": [
                {
                    "name": "mps",
                    "image": "ubuntu:22.04",
                    "command": ["bash", "-c", "trap 'exit 0' TERM; sleep infinity & wait"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        },
    }


def test_plugin_container_killed_keeps_the_mps_server_and_the_claim_stays_usable(
    driver: Driver,
) -> None:
    cluster, manifest = driver.cluster, demo("quickstart_v1_gpu-test-mps.yaml")
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        running_pods(cluster, NS, 1)
        node = str(cluster.kubectl_json("get", "pod", "test-pod", "-n", NS)["spec"]["nodeName"])
        server = _exec(cluster, "test-pod", "mps-ctr0", SERVER).strip()
        assert server.isdigit(), server
        (claim,) = pod_claims(cluster, "test-pod", NS).values()
        claim_name = str(claim["metadata"]["name"])

        pod, container_id, restarts = plugin_container(driver, node)
        kill_through_containerd(cluster, node, container_id)
        cluster.wait_until(
            "the kubelet to restart the plugin container and the plugin to be ready",
            lambda: (
                (now := plugin_container(driver, node))[2] > restarts
                and now[1] != container_id
                and all(
                    s.get("ready")
                    for p in driver.plugin_pods()
                    if p["metadata"]["name"] == pod
                    for s in p["status"].get("containerStatuses", [])
                )
            ),
            timeout=240,
            interval=2,
        )

        # The running pod keeps its server: the same daemon, never restarted.
        restarted = _exec(cluster, "test-pod", "mps-ctr0", SERVER).strip()
        assert restarted == server
        deployments = cluster.kubectl_json("get", "deployments", "-n", driver.namespace)
        assert [d["metadata"]["name"] for d in deployments["items"]
                if d["metadata"]["name"].startswith("mps-")], "the daemon's Deployment"  # fmt: skip
        assert _exec(cluster, "test-pod", "mps-ctr1", THREADS).strip() == "50.0"
        gpus = [g for g in fake_gpu_state(driver, node).values() if g["compute_mode"] == 3]
        assert len(gpus) == 1, "the claim's GPU is still EXCLUSIVE_PROCESS"

        # A new client on the same claim starts and finds the same server.
        cluster.apply(as_json(_client_pod(claim_name)))
        wait_running(cluster, "second-client", NS)
        assert _exec(cluster, "second-client", "mps", SERVER).strip() == restarted
        assert _exec(cluster, "second-client", "mps", THREADS).strip() == "50.0"
    state = fake_gpu_state(driver, node)
    assert all(g["compute_mode"] == 0 for g in state.values())
    left = cluster.kubectl_json("get", "deployments", "-n", driver.namespace)["items"]
    # Gone, or going (a foreground delete keeps the object until the garbage collector ends).
    assert not [
        d
        for d in left
        if d["metadata"]["name"].startswith("mps-") and not d["metadata"].get("deletionTimestamp")
    ]
