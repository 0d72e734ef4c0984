"""The scale workload's manifests and checks (pure)."""

from __future__ import annotations

from dra_api_types import ResourceClaimTemplate
from dra_e2e.scale_workload import (
    MIG_1G,
    TEMPLATES,
    TIME_SLICED,
    WHOLE_GPU,
    claim_template,
    device_classes,
    double_allocations,
    pending_claim,
    replicas,
    running_on_nodes,
    unallocated,
    workload,
)


def _claim(name: str, *devices: tuple[str, str]) -> dict[str, object]:
    results = [
        {"driver": "gpu.nvidia.com", "pool": p, "device": d, "request": "gpu"} for p, d in devices
    ]
    status = {"allocation": {"devices": {"results": results}}} if devices else {}
    return {"metadata": {"name": name}, "status": status}


def test_replicas_split_by_share_and_sum_to_the_total() -> None:
    assert replicas(200) == {"whole-gpu": 80, "mig-1g": 80, "time-sliced": 40}
    for total in (0, 1, 7, 5000):
        assert sum(replicas(total).values()) == total
    assert replicas(7) == {"whole-gpu": 3, "mig-1g": 3, "time-sliced": 1}


def test_templates_are_valid_claim_templates() -> None:
    for kind in TEMPLATES:
        parsed = ResourceClaimTemplate.from_dict(claim_template(kind, "ns"), validate=True)
        assert parsed.metadata.name == kind.name
    mig = claim_template(MIG_1G, "ns")["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert "1g.5gb" in mig["selectors"][0]["cel"]["expression"]
    sliced = claim_template(TIME_SLICED, "ns")["spec"]["spec"]["devices"]["config"][0]
    assert sliced["opaque"]["parameters"]["sharing"]["strategy"] == "TimeSlicing"
    assert "config" not in claim_template(WHOLE_GPU, "ns")["spec"]["spec"]["devices"]


def test_workload_pods_tolerate_and_select_kwok_nodes() -> None:
    objects = workload("ns", 10)
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert sum(d["spec"]["replicas"] for d in deployments) == 10
    for d in deployments:
        pod = d["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {"type": "kwok"}
        assert pod["tolerations"][0]["key"] == "kwok.x-k8s.io/node"
        assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == d["metadata"]["name"]
    assert [c["metadata"]["name"] for c in device_classes()] == ["gpu.nvidia.com", "mig.nvidia.com"]


def test_double_allocations_and_unallocated_claims_are_found() -> None:
    claims = [
        _claim("a", ("n1", "gpu-0")),
        _claim("b", ("n1", "gpu-0")),
        _claim("c", ("n2", "gpu-0")),
        _claim("d"),
    ]
    assert double_allocations(claims) == {("gpu.nvidia.com", "n1", "gpu-0"): 2}
    assert double_allocations(claims[2:]) == {}
    assert unallocated(claims) == ["d"]


def test_running_pods_count_only_live_ones_on_the_given_nodes() -> None:
    pods = [
        {"metadata": {}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}},
        {"metadata": {}, "spec": {"nodeName": "n2"}, "status": {"phase": "Running"}},
        {
            "metadata": {"deletionTimestamp": "x"},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Running"},
        },
        {"metadata": {}, "spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}},
    ]
    assert running_on_nodes(pods, {"n1"}) == 1


def test_the_pending_claim_asks_one_gpu_more_than_a_node_has() -> None:
    claim = pending_claim("bench", 8)
    assert claim["metadata"] == {"name": "explain-pending", "namespace": "bench"}
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"] == {"deviceClassName": "gpu.nvidia.com", "count": 9}
