"""The controller's informer transforms keep every field it reads, and share equal parts."""

from __future__ import annotations

import copy
from typing import Any

from controller_objects import GPU_CLASS, MIG_CLASS, claim, gpu, mig, node, pod, slice_, stores
from dra_allocator.extended_resources import CLAIM_ANNOTATION
from dra_allocator.nodes import NodeInfo
from dra_controller.allocation_controller import AllocationController, ControllerMetrics
from dra_controller.allocation_controller.caches import (
    CONTROLLER_RESOURCES,
    PENDING_PODS,
    share_subtrees,
    trim_claim,
    trim_controller_pod,
    trim_node,
)
from dra_controller.allocation_controller.diagnosis import is_unschedulable
from dra_controller.allocation_controller.view import ClusterView
from dra_kube_client.informers import ALL_RESOURCES, Informer, trim_pod
from dra_kube_client.informers.store import Store
from dra_kube_client.testing import MemoryApi
from dra_kube_client.testing.selectors import matches, parse_selector
from prometheus_client import generate_latest

MANAGED = [{"manager": "kube-scheduler", "operation": "Update", "fieldsV1": {"f:status": {}}}]


def _noisy(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the bookkeeping the API server adds (none of it read by the controller)."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    meta.update(
        managedFields=MANAGED,
        creationTimestamp="2026-12-04T10:00:00Z",
        generation=1,
        generateName=f"{meta['name']}-",
        finalizers=["resource.kubernetes.io/delete-protection"],
        ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}],
    )
    return out


def _bound_pod(name: str, claim_name: str, node_name: str) -> dict[str, Any]:
    out = _noisy(pod(name, claim_name, unschedulable=False))
    out["spec"]["nodeName"] = node_name
    out["spec"]["volumes"] = [{"name": "token", "projected": {"sources": []}}]
    out["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
        "podIP": "10.0.0.1",
    }
    return out


def _labelled_node(name: str) -> dict[str, Any]:
    out = _noisy(node(name))
    out["metadata"]["labels"] = {"kubernetes.io/hostname": name, "zone": "a"}
    out["metadata"]["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    out["spec"] = {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}
    out["status"] = {
        "allocatable": {"cpu": "64", "example.com/gpu": "2"},
        "capacity": {"cpu": "64"},
        "conditions": [{"type": "Ready", "status": "True"}],
        "nodeInfo": {"kubeletVersion": "v1.34.0"},
    }
    return out


def _cluster_objects() -> list[dict[str, Any]]:
    held = _noisy(claim("held", allocated_on=("n1", "gpu-0")))
    held["status"]["reservedFor"] = [{"resource": "pods", "name": "runs", "uid": "uid-pod-runs"}]
    return [
        GPU_CLASS,
        MIG_CLASS,
        _labelled_node("n1"),
        _labelled_node("n2"),
        _noisy(slice_("n1", [gpu("gpu-0", "8Gi"), gpu("gpu-1", "8Gi")])),
        _noisy(slice_("n2", [gpu("gpu-0", "8Gi"), mig("mig-0", "1g.5gb"), mig("mig-1", "1g.5gb")])),
        held,
        _noisy(claim("waiting-mig", cls="mig.nvidia.com")),
        _noisy(claim("too-big", selector="device.attributes['gpu.nvidia.com'].type == 'none'")),
        _bound_pod("runs", "held", "n1"),
        _noisy(pod("stuck", "too-big")),
        _noisy(pod("queued", "waiting-mig", unschedulable=False)),
    ]


def _fill(transforms: bool) -> dict[str, Store]:
    """The objects as the informers would cache them, with the controller's selectors and
    transforms or with ``ALL_RESOURCES``' (the untrimmed baseline)."""
    resources = {r.kind: r for r in (CONTROLLER_RESOURCES if transforms else ALL_RESOURCES)}
    filled = stores([])
    for obj in _cluster_objects():
        resource = resources[obj["kind"]]
        if matches(obj, fields=parse_selector(resource.field_selector)):
            filled[obj["kind"]].upsert(resource.transform(obj))
    return filled


def _seed_metrics(controller: AllocationController) -> list[str]:
    text = generate_latest(controller.metrics.registry).decode()
    return [line for line in text.splitlines() if line.startswith(("kube_", "node_dra_resource"))]


def test_trimmed_caches_give_the_same_metrics_and_findings() -> None:
    results = []
    for transforms in (False, True):
        controller = AllocationController(_fill(transforms), metrics=ControllerMetrics())
        series, findings = controller.reconcile()
        results.append(
            (
                series,
                [(f.pod_key, f.claim.key, f.message) for f in findings],
                _seed_metrics(controller),
            )
        )
    untrimmed, trimmed = results
    assert trimmed == untrimmed
    series, found, lines = trimmed
    assert [f[:2] for f in found] == [("team/stuck", "team/too-big")]
    assert any('kube_resourceclaim_allocated{name="held"' in line for line in lines)
    assert len(series.available) > 0


def test_the_controller_watches_only_pods_not_bound() -> None:
    """Through the informer against an API that sends a pod's binding as its DELETED event
    (as the API server's watch cache does for an object leaving a field selection): a pod is
    cached while pending, dropped when bound, and its later status updates never arrive."""
    (pods,) = [r for r in CONTROLLER_RESOURCES if r.kind == "Pod"]
    assert pods.selectors == {"fieldSelector": PENDING_PODS}
    assert _fill(transforms=True)["Pod"].items().keys() == {"team/stuck", "team/queued"}
    api = MemoryApi()
    path = "/api/v1/namespaces/team/pods"
    api.request("POST", path, body=pod("runs", "held", unschedulable=False))
    api.request("POST", path, body=pod("stuck", "too-big"))
    informer = Informer(api, pods)
    version = informer.list_once()
    assert informer.store.items().keys() == {"team/runs", "team/stuck"}
    api.request("PATCH", f"{path}/runs", body={"spec": {"nodeName": "n1"}})
    api.request("PATCH", f"{path}/runs", body={"status": {"phase": "Running"}})
    api.request("PATCH", f"{path}/stuck", body={"metadata": {"labels": {"retry": "1"}}})
    sent = api.watch_lines(
        pods.path, query={**pods.selectors, "resourceVersion": version}, timeout_s=1
    )
    # The binding (as DELETED) and stuck's change; not the bound pod's status update.
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in sent] == [
        ("DELETED", "runs"),
        ("MODIFIED", "stuck"),
    ]
    informer.watch_once(version)
    assert informer.store.items().keys() == {"team/stuck"}
    snap = ClusterView(stores={"Pod": informer.store}).snapshot()
    assert [is_unschedulable(p) for p in snap.pods] == [True]


def test_pending_pods_keep_what_trim_pod_keeps() -> None:
    pending = _noisy(pod("stuck", "too-big"))
    trimmed = trim_controller_pod(copy.deepcopy(pending))
    assert trimmed == trim_pod(copy.deepcopy(pending))
    snap = ClusterView(stores=stores([trimmed])).snapshot()
    assert [is_unschedulable(p) for p in snap.pods] == [True]


def test_node_keeps_what_node_info_reads() -> None:
    raw = _labelled_node("n1")
    trimmed = trim_node(copy.deepcopy(raw))
    assert NodeInfo.from_dict(trimmed) == NodeInfo.from_dict(raw)
    assert "annotations" not in trimmed["metadata"]
    assert trimmed["status"] == {"allocatable": {"cpu": "64", "example.com/gpu": "2"}}


def test_claim_drops_reservations_and_owners_but_not_of_extended_resource_claims() -> None:
    raw = _cluster_objects()[6]
    trimmed = trim_claim(copy.deepcopy(raw))
    assert "reservedFor" not in trimmed["status"]
    assert trimmed["status"]["allocation"] == raw["status"]["allocation"]
    assert trimmed["spec"] == raw["spec"]
    assert set(trimmed["metadata"]) == {"name", "namespace", "uid", "resourceVersion"}
    special = copy.deepcopy(raw)
    special["metadata"]["annotations"] = {CLAIM_ANNOTATION: "true"}
    kept = trim_claim(copy.deepcopy(special))
    assert kept["metadata"]["ownerReferences"] == special["metadata"]["ownerReferences"]
    assert kept["metadata"]["annotations"] == {CLAIM_ANNOTATION: "true"}


def test_share_subtrees_is_equal_and_shares_equal_parts() -> None:
    devices = [gpu(f"gpu-{i}", "8Gi") for i in range(3)]
    raw = {"spec": {"devices": devices, "flags": [True, 1, 1.0, None, "1"]}}
    shared = share_subtrees(copy.deepcopy(raw))
    assert shared == raw
    out = shared["spec"]["devices"]
    assert out[0]["attributes"] is out[1]["attributes"] is out[2]["attributes"]
    assert out[0]["capacity"] is out[2]["capacity"]
    assert out[0] is not out[1]
    # True, 1 and 1.0 are equal in Python but not in JSON: each keeps its type.
    assert [type(v) for v in shared["spec"]["flags"]] == [bool, int, float, type(None), str]
