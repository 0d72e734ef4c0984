"""50 simulated GPU nodes, 200 pods: the real scheduler allocates every claim, once, and
recovers from pod and node deletions (the small version of ``make bench BENCH=scale``).

The nodes are kwok's, each with the slices the GPU plugin publishes for its fleet (GB200,
H100, MIG A100); the pods come from Deployments with ResourceClaimTemplates (whole GPUs, 1g
MIG devices, a time-slicing config). No driver is installed: the kube-scheduler allocates,
kwok runs the pods.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from dra_e2e.handle import ClusterHandle
from dra_e2e.kwok import NODE_PREFIX
from dra_e2e.kwok_cluster import add_kwok_nodes, delete_kwok_nodes, list_kwok_nodes, transport_of
from dra_e2e.kwok_slices import GB200, fleet_of
from dra_e2e.scale_workload import (
    APP_LABEL,
    device_classes,
    double_allocations,
    running_on_nodes,
    unallocated,
    workload,
)

NODES = 50
PODS = 200
DELETED_PODS = 20
DELETED_NODES = 5

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


@pytest.fixture(scope="module")
def kwok_nodes(e2e_cluster: ClusterHandle) -> Iterator[list[str]]:
    """Fifty simulated GPU nodes on the local cluster, deleted afterwards."""
    if e2e_cluster.local is None:
        pytest.skip("kwok nodes need the local e2e cluster (not --kubeconfig)")
    names = add_kwok_nodes(e2e_cluster.local, NODES)
    yield names
    transport = transport_of(e2e_cluster.local)
    try:
        delete_kwok_nodes(transport, [n["metadata"]["name"] for n in list_kwok_nodes(transport)])
    finally:
        transport.close()


def _items(cluster: ClusterHandle, kind: str, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.kubectl_json("get", kind, "-n", namespace)["items"]
    return items


def _settled(cluster: ClusterHandle, namespace: str, nodes: set[str]) -> bool:
    """Every wanted pod Running on a live node, one allocated claim each, no device twice."""
    pods = [p for p in _items(cluster, "pods", namespace) if APP_LABEL in p["metadata"]["labels"]]
    claims = _items(cluster, "resourceclaims", namespace)
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert not double_allocations(claims)
    return (
        len(live) == PODS
        and running_on_nodes(live, nodes) == PODS
        and len(claims) == PODS
        and not unallocated(claims)
    )


def test_claims_are_allocated_once_and_survive_churn(
    e2e_cluster: ClusterHandle, e2e_namespace: str, kwok_nodes: list[str]
) -> None:
    cluster, ns = e2e_cluster, e2e_namespace
    for device_class in device_classes():
        if not cluster.exists("deviceclass", device_class["metadata"]["name"]):
            cluster.kubectl("create", "-f", "-", input_text=json.dumps(device_class))
    cluster.apply("\n---\n".join(json.dumps(o) for o in workload(ns, PODS)), namespace=ns)
    nodes = set(kwok_nodes)
    cluster.wait_until(
        f"{PODS} pods Running with allocated claims",
        lambda: _settled(cluster, ns, nodes),
        timeout=240,
        interval=3,
    )
    claims = _items(cluster, "resourceclaims", ns)
    slices = [
        s
        for s in cluster.kubectl_json("get", "resourceslices")["items"]
        if s["spec"].get("nodeName") in nodes
    ]
    assert {s["spec"]["nodeName"] for s in slices} == nodes
    # The GB200 nodes (every third) also carry the compute-domain plugin's IMEX channel.
    gb200 = {n for n in nodes if fleet_of(int(n.removeprefix(NODE_PREFIX))) == GB200}
    assert {
        s["spec"]["nodeName"] for s in slices if s["spec"]["driver"] == "compute-domain.nvidia.com"
    } == gb200
    used_pools = {
        r["pool"] for c in claims for r in c["status"]["allocation"]["devices"]["results"]
    }
    assert used_pools <= nodes

    rng = random.Random(27)
    pods = [p["metadata"]["name"] for p in _items(cluster, "pods", ns)]
    doomed_pods = rng.sample(pods, DELETED_PODS)
    cluster.kubectl("delete", "pod", "-n", ns, "--wait=false", *doomed_pods)
    doomed_nodes = rng.sample(sorted(nodes), DELETED_NODES)
    transport = transport_of(cluster.local) if cluster.local else None
    assert transport is not None
    try:
        delete_kwok_nodes(transport, doomed_nodes)
    finally:
        transport.close()
    remaining = nodes - set(doomed_nodes)
    cluster.wait_until(
        "pods of deleted pods and nodes replaced, their claims freed",
        lambda: _settled(cluster, ns, remaining),
        timeout=240,
        interval=3,
    )
    after = _items(cluster, "resourceclaims", ns)
    assert not {
        r["pool"] for c in after for r in c["status"]["allocation"]["devices"]["results"]
    } & (set(doomed_nodes))
    live_pods = {p["metadata"]["name"] for p in _items(cluster, "pods", ns)}
    assert not live_pods & set(doomed_pods)
    # The deleted Nodes' slices are owned by them: the garbage collector removes them.
    cluster.wait_until(
        "the deleted nodes' ResourceSlices garbage-collected",
        lambda: (
            not [
                s
                for s in cluster.kubectl_json("get", "resourceslices")["items"]
                if s["spec"].get("nodeName") in doomed_nodes
            ]
        ),
        timeout=60,
    )
