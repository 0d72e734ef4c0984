"""The driver on a cluster of two nodes: one chart install with the chart's default paths serves
both, each node publishes its own fake GPUs, and claims are prepared and unprepared on the node
their pod runs on.

Runs on ``e2e_cluster_nodes`` (``e2e_nodes(2)``): a local cluster of two nodes for this module
(``e2e-cluster up --nodes 2``), the driver installed the way ``e2e-cluster install-driver`` does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import yaml
from dra_e2e.configs import KUBELET_ROOT
from dra_e2e.handle import ClusterHandle
from driver_support import (
    DRIVER,
    Driver,
    applied,
    exists,
    install,
    pod,
    pod_claims,
    smi_lines,
    uninstall,
    wait_gone,
    wait_running,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.e2e_nodes(2)]


@pytest.fixture(scope="module")
def driver(
    e2e_cluster_nodes: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart installed once on both nodes (overrides the session cluster's ``driver``)."""
    installed = install(e2e_cluster_nodes, tmp_path_factory.mktemp("driver-images"))
    yield installed
    uninstall(installed)


def _uuids(driver: Driver, node: str) -> set[str]:
    return {d["attributes"]["uuid"]["string"] for d in driver.devices(node).values()}


def test_one_install_runs_the_plugin_and_publishes_slices_on_every_node(driver: Driver) -> None:
    assert len(driver.nodes) == 2
    plugin_nodes = sorted(p["spec"]["nodeName"] for p in driver.plugin_pods())
    assert plugin_nodes == sorted(driver.nodes)
    for node in driver.nodes:
        assert driver.slices(node), f"no {DRIVER} slice of {node}"
    first, second = driver.nodes
    # Fake GPUs are seeded by node name: two nodes never share a UUID.
    assert _uuids(driver, first)
    assert _uuids(driver, second)
    assert not _uuids(driver, first) & _uuids(driver, second)
    if driver.local:
        # Each node's /var/lib/kubelet is its own directory: the plugin's files are there,
        # none on the host's own path.
        for node in driver.nodes:
            assert (driver.plugin_dir(node) / "checkpoint.json").is_file()
        assert not (KUBELET_ROOT / "plugins" / DRIVER).exists()


def _manifest(namespace: str) -> str:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu", "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}
            }
        },
    }
    anti_affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "spread"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "spread"}},
            "spec": {
                "affinity": anti_affinity,
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "ctr",
                        "image": "ubuntu:22.04",
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["bash", "-c", "nvidia-smi -L && sleep 3600"],
                        "resources": {"claims": [{"name": "gpu"}]},
                    }
                ],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
            },
        }
        for name in ("spread-0", "spread-1")
    ]
    namespace_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    return yaml.safe_dump_all([namespace_obj, template, *pods])


def test_pods_spread_over_both_nodes_get_a_gpu_of_their_node_and_unprepare(
    driver: Driver,
) -> None:
    cluster = driver.cluster
    namespace = f"e2e-spread-{uuid.uuid4().hex[:6]}"
    prepared: dict[str, tuple[str, str]] = {}
    with applied(cluster, _manifest(namespace), namespaces=(namespace,)):
        cluster.wait_until(
            f"service account default in {namespace}",
            lambda: exists(cluster, "serviceaccount", "default", "-n", namespace),
        )
        for name in ("spread-0", "spread-1"):
            wait_running(cluster, name, namespace)
        placed = {
            name: pod(cluster, name, namespace)["spec"]["nodeName"]
            for name in ("spread-0", "spread-1")
        }
        assert sorted(placed.values()) == sorted(driver.nodes), placed
        for name, node in placed.items():
            (claim,) = pod_claims(cluster, name, namespace).values()
            (result,) = claim["status"]["allocation"]["devices"]["results"]
            assert (result["driver"], result["pool"]) == (DRIVER, node)
            device = driver.devices(node)[result["device"]]
            ((_, _, gpu_uuid),) = _gpu_lines(cluster, name, namespace)
            assert gpu_uuid == device["attributes"]["uuid"]["string"]
            claim_uid = claim["metadata"]["uid"]
            if driver.local:
                assert any(claim_uid in p.name for p in driver.cdi_dir(node).iterdir())
            prepared[node] = (claim["metadata"]["name"], claim_uid)
    # Deleting the pods deletes their generated claims and unprepares each on its own node.
    assert len(prepared) == 2
    for node, (claim_name, claim_uid) in prepared.items():
        _assert_unprepared(driver, node, namespace, claim_name, claim_uid)


def _gpu_lines(cluster: ClusterHandle, name: str, namespace: str) -> list[tuple[int, str, str]]:
    def lines() -> list[tuple[int, str, str]]:
        return smi_lines(cluster.kubectl("logs", name, "-n", namespace))

    found: list[tuple[int, str, str]] = cluster.wait_until(
        f"nvidia-smi -L of {namespace}/{name}", lines, timeout=60
    )
    return found


def _assert_unprepared(
    driver: Driver, node: str, namespace: str, claim_name: str, claim_uid: str
) -> None:
    cluster = driver.cluster

    def claim_gone() -> bool:
        return not exists(cluster, "resourceclaim", claim_name, "-n", namespace)

    wait_gone(cluster, f"generated claim {claim_name} deleted", claim_gone)
    if not driver.local:
        return
    cdi = driver.cdi_dir(node)

    def spec_gone() -> bool:
        return not any(claim_uid in p.name for p in cdi.iterdir())

    wait_gone(cluster, f"CDI spec of claim {claim_uid} removed on {node}", spec_gone)
    checkpoint = (driver.plugin_dir(node) / "checkpoint.json").read_text()
    assert claim_uid not in checkpoint, f"checkpoint entry of {claim_uid} on {node}"
