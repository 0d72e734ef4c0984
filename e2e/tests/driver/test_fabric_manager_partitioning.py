"""NVIDIA's ``fabric-manager-partitioning`` demo on the harness, unchanged: the chart on fake
GPUs with ``PassthroughSupport`` and ``FabricManagerPartitioning`` on (each fake node has a
fake Fabric Manager with the HGX layout of its eight GPUs).

The claim template asks two ``vfio.gpu.nvidia.com`` GPUs with ``matchAttribute:
gpu.nvidia.com/partition2``: the scheduler picks two passthrough GPUs of one size-2 partition,
the plugin activates that partition while the pod runs (the fake Fabric Manager's state on
the node shows it) and deactivates it when the pod and its claim are gone, as NVIDIA's does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from demo_specs import demo
from dra_e2e.handle import ClusterHandle
from driver_support import (
    Driver,
    allocated_devices,
    applied,
    own_install,
    pod,
    pod_claims,
    wait_running,
)

# driver_diagnostics: conftest.py.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

GATES = {
    "featureGates.PassthroughSupport": "true",
    "featureGates.FabricManagerPartitioning": "true",
}
POD = "fm-partition-pod"


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart on fake GPUs with both gates on (one install for the module)."""
    workdir = tmp_path_factory.mktemp("fm-images")
    with own_install(
        e2e_cluster, workdir, GATES, needs="FabricManagerPartitioning on"
    ) as installed:
        yield installed


def _active(driver: Driver, node: str) -> set[int]:
    """Active partitions of the node's fake Fabric Manager (its state file, read only)."""
    doc = json.loads((driver.plugin_dir(node) / "fake-fabric-manager.json").read_text())
    return {p["id"] for p in doc["partitions"] if p["active"]}


def test_the_demo_pod_gets_two_gpus_of_one_partition_activated_while_it_runs(
    driver: Driver,
) -> None:
    cluster = driver.cluster
    for node in driver.nodes:
        vfio = {
            n: d["attributes"]
            for n, d in driver.devices(node).items()
            if d["attributes"]["type"]["string"] == "vfio"
        }
        assert vfio, "PassthroughSupport publishes gpu-vfio-M devices"
        assert all("partition2" in a and "gpuModuleID" in a for a in vfio.values()), vfio
        assert _active(driver, node) == set()
    manifest = "---\n".join(
        demo(f"fabric-manager-partitioning_{name}.yaml")
        for name in ("resourceClaimTemplates", "pod")
    )
    with applied(cluster, manifest):
        wait_running(cluster, POD, "default")
        node = pod(cluster, POD, "default")["spec"]["nodeName"]
        (claim,) = pod_claims(cluster, POD, "default").values()
        devices = allocated_devices(claim)
        published = driver.devices(node)
        assert len(devices) == 2
        attrs: list[dict[str, Any]] = [published[d]["attributes"] for d in devices]
        assert {a["type"]["string"] for a in attrs} == {"vfio"}
        (partition,) = {a["partition2"]["int"] for a in attrs}
        assert _active(driver, node) == {partition}
    cluster.wait_until(
        f"partition {partition} deactivated on {node} after the pod",
        lambda: _active(driver, node) == set(),
        timeout=120,
        interval=2,
    )
