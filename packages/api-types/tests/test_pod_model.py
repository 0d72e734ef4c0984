"""The typed Pod: the fields DRA tools read are typed, every other field survives a round trip."""

from __future__ import annotations

from typing import Any

import pytest
from dra_api_types import Pod, ValidationError, parse_object
from dra_api_types.strict import unknown_fields
from dra_api_types.testing import pod

FULL: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer", "namespace": "team", "uid": "u1", "labels": {"app": "x"}},
    "spec": {
        "nodeName": "node-1",
        "nodeSelector": {"gpu": "h100"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}],
            },
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []},
        },
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "priorityClassName": "high",
        "priority": 1000,
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "initContainers": [{"name": "init", "image": "busybox"}],
        "containers": [
            {
                "name": "main",
                "image": "cuda",
                "command": ["nvidia-smi"],
                "resources": {"limits": {"nvidia.com/gpu": 1}, "claims": [{"name": "gpu"}]},
            }
        ],
        "restartPolicy": "Never",
    },
    "status": {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "trainer-gpu-abcde"}],
        "extendedResourceClaimStatus": {
            "resourceClaimName": "trainer-extended-resources-x",
            "requestMappings": [
                {"containerName": "main", "requestName": "r0", "resourceName": "nvidia.com/gpu"}
            ],
        },
    },
}


def test_fields_dra_tools_read_are_typed() -> None:
    p = Pod.from_dict(FULL)
    assert (p.key, p.namespace, p.name) == ("team/trainer", "team", "trainer")
    assert p.spec.node_name == "node-1"
    assert p.spec.node_selector == {"gpu": "h100"}
    assert p.spec.affinity is not None
    assert p.spec.affinity.node_affinity is not None
    required = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert required is not None
    (term,) = required.node_selector_terms
    assert term.match_expressions is not None
    assert term.match_expressions[0].values == ["a"]
    assert [(t.key, t.operator, t.effect) for t in p.spec.tolerations or []] == [
        ("gpu", "Exists", "NoSchedule")
    ]
    assert (p.spec.priority_class_name, p.spec.priority) == ("high", 1000)
    assert [c.resource_claim_template_name for c in p.spec.resource_claims or []] == ["one-gpu"]
    groups = [(g, [c.name for c in cs]) for g, cs in p.spec.container_groups()]
    assert groups == [("initContainers", ["init"]), ("containers", ["main"])]
    resources = p.spec.containers[0].resources
    assert resources is not None
    assert [c.name for c in resources.claims or []] == ["gpu"]
    statuses = p.status.resource_claim_statuses or []
    assert [(s.name, s.resource_claim_name) for s in statuses] == [("gpu", "trainer-gpu-abcde")]
    assert [(c.type, c.reason) for c in p.status.conditions or []] == [
        ("PodScheduled", "Unschedulable")
    ]
    extended = p.status.extended_resource_claim_status
    assert extended is not None
    assert extended.resource_claim_name == "trainer-extended-resources-x"


def test_every_other_field_survives_a_round_trip() -> None:
    assert Pod.from_dict(FULL).to_dict() == FULL
    assert Pod.from_dict(pod("p", claims={"gpu": "c1"})).to_dict() == pod("p", claims={"gpu": "c1"})


def test_unset_namespace_reads_as_default() -> None:
    assert Pod.from_dict({"metadata": {"name": "p"}}).key == "default/p"


def test_a_mistyped_field_is_an_error_naming_its_path() -> None:
    bad = {**FULL, "spec": {**FULL["spec"], "priority": "high"}}
    with pytest.raises(ValidationError) as info:
        Pod.from_dict(bad)
    assert info.value.path == "spec.priority"
    assert "team/trainer" in str(info.value)


def test_another_kind_is_refused() -> None:
    with pytest.raises(ValidationError, match="expected 'Pod'"):
        Pod.from_dict({"apiVersion": "v1", "kind": "Node"})


def test_pods_stay_unregistered_so_strict_decoding_does_not_judge_them() -> None:
    # The model has a subset of a Pod's fields: as a registered kind, every other field of a
    # Pod would read as unknown to parse_object's callers and to strict decoding.
    assert isinstance(parse_object(FULL), dict)
    assert unknown_fields(FULL) == []
