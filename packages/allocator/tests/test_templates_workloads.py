"""Pods of workloads and claims of ResourceClaimTemplates, as their controllers make them."""

from __future__ import annotations

from typing import Any

import pytest
from dra_allocator.errors import AllocationError
from dra_allocator.templates import claim_generate_name, claims_from_templates, offline_claim_name
from dra_allocator.workloads import NAME_ALPHABET, workload_pods
from dra_api_types import Pod, ResourceClaim, ResourceClaimTemplate

TEMPLATE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "t", "namespace": "ns"},
    "spec": {
        "metadata": {"labels": {"team": "a"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}]}},
    },
}
TEMPLATES = {"ns/t": ResourceClaimTemplate.from_dict(TEMPLATE)}
POD_SPEC = {
    "containers": [{"name": "main", "image": "x"}],
    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
}


def _pod(uid: str | None = "u") -> Pod:
    meta = {"name": "p", "namespace": "ns"} | ({"uid": uid} if uid else {})
    return Pod.from_dict({"metadata": meta, "spec": POD_SPEC})


def _workload(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    api = "batch/v1" if kind in ("Job", "CronJob") else "apps/v1"
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": spec,
    }


def test_generate_name_is_the_controllers_and_long_names_are_cut_in_proportion() -> None:
    assert claim_generate_name("pod1", "gpu") == "pod1-gpu-"
    long_pod, long_claim = "p" * 60, "c" * 30
    cut = claim_generate_name(long_pod, long_claim)
    # upstream: pod[:60*57//92] + "-" + claim[:30*57//92]
    assert cut == "p" * 37 + "-" + "c" * 18
    name = offline_claim_name("ns", long_pod, long_claim)
    assert len(name) <= 63
    assert name.startswith(cut)
    suffix = offline_claim_name("ns", "pod1", "gpu").removeprefix("pod1-gpu-")
    assert len(suffix) == 5
    assert set(suffix) <= set(NAME_ALPHABET)
    assert offline_claim_name("ns", "pod1", "gpu") == offline_claim_name("ns", "pod1", "gpu")
    assert offline_claim_name("ns", "pod1", "gpu") != offline_claim_name("other", "pod1", "gpu")


def test_claims_from_templates_records_status_and_copies_template() -> None:
    pod = _pod()
    made = claims_from_templates([pod], TEMPLATES, [])
    (made_claim,) = made.claims
    claim = made_claim.to_dict()
    name = offline_claim_name("ns", "p", "gpu")
    assert claim["metadata"] == {
        "name": name,
        "namespace": "ns",
        "labels": {"team": "a"},
        "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Pod", "name": "p", "controller": True, "uid": "u"}
        ],
    }
    assert claim["spec"] == TEMPLATE["spec"]["spec"]
    assert made.pods[0].to_dict()["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": name}
    ]
    assert "status" not in pod.to_dict()  # the input is not changed
    # Run again on its own output: nothing more is made.
    again = claims_from_templates(made.pods, TEMPLATES, made.claims)
    assert again.claims == []
    assert again.pods == made.pods


def test_a_claim_the_controller_made_is_found_by_owner_and_annotation() -> None:
    existing = ResourceClaim.from_dict(
        {
            "metadata": {
                "name": "p-gpu-abcde",
                "namespace": "ns",
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "u"}],
            }
        }
    )
    made = claims_from_templates([_pod()], {}, [existing])
    assert made.claims == []
    assert made.pods[0].to_dict()["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": "p-gpu-abcde"}
    ]


def test_missing_template_names_pod_and_field() -> None:
    with pytest.raises(AllocationError) as err:
        claims_from_templates([_pod(uid=None)], {}, [])
    assert "Pod ns/p" in str(err.value)
    assert "spec.resourceClaims[0].resourceClaimTemplateName" in str(err.value)


@pytest.mark.parametrize(
    ("kind", "spec", "names"),
    [
        ("StatefulSet", {"replicas": 3}, ["w-0", "w-1", "w-2"]),
        ("StatefulSet", {"replicas": 0}, []),
        ("Deployment", {}, 1),
        ("ReplicaSet", {"replicas": 2}, 2),
        ("Job", {"parallelism": 4, "completions": 2}, 2),
        ("Job", {"suspend": True}, []),
    ],
)
def test_workload_replicas(kind: str, spec: dict[str, Any], names: list[str] | int) -> None:
    pods = workload_pods(_workload(kind, {**spec, "template": {"spec": POD_SPEC}}))
    got = [p.name for p in pods]
    if isinstance(names, int):
        assert len(got) == names == len(set(got))
        assert all(n.startswith("w-") for n in got)
    else:
        assert got == names
    assert all(p.namespace == "ns" and p.to_dict()["spec"] == POD_SPEC for p in pods)


def test_cronjob_pods_come_from_its_job_template() -> None:
    job = {"parallelism": 2, "template": {"spec": POD_SPEC}}
    pods = workload_pods(_workload("CronJob", {"jobTemplate": {"spec": job}}))
    assert len(pods) == 2
    assert pods[0].to_dict()["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert (
        workload_pods(_workload("CronJob", {"suspend": True, "jobTemplate": {"spec": job}})) == []
    )


def test_bad_replicas_and_template_are_errors_naming_the_field() -> None:
    with pytest.raises(AllocationError, match=r"spec\.replicas"):
        workload_pods(_workload("Deployment", {"replicas": "2", "template": {"spec": POD_SPEC}}))
    with pytest.raises(AllocationError, match=r"spec\.template"):
        workload_pods(_workload("StatefulSet", {"replicas": 1}))


def test_a_mistyped_pod_template_field_is_named_in_the_workload() -> None:
    spec = {**POD_SPEC, "priority": "high"}
    with pytest.raises(AllocationError) as err:
        workload_pods(_workload("Deployment", {"template": {"spec": spec}}))
    assert err.value.object_ref == "Deployment ns/w"
    assert err.value.field == "spec.template.spec.priority"
