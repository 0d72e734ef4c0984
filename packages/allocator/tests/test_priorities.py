"""Pods' ``spec.priority`` from the input's PriorityClasses, as the Priority admission
plugin sets it, and a missing class said, not ignored."""

from __future__ import annotations

from typing import Any

import pytest
from dra_allocator.errors import AllocationError
from dra_allocator.inputs import Document
from dra_allocator.priorities import PriorityClasses, resolve_priorities
from dra_allocator.snapshot import build_snapshot
from dra_api_types.core_v1 import Pod


def _class(name: str, value: object, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **extra,
    }


def _pod_doc(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"containers": [{"name": "main", "image": "x"}], **spec},
    }


def _pod(name: str, **spec: Any) -> Pod:
    return Pod.model_validate(_pod_doc(name, **spec))


def _priorities(pods: list[Pod], classes: list[dict[str, Any]]) -> list[object]:
    out = resolve_priorities(pods, PriorityClasses.from_objects(classes))
    return [p.spec.priority for p in out.pods]


def test_a_class_of_the_input_gives_its_value_and_the_system_classes_are_built_in() -> None:
    pods = [
        _pod("a", priorityClassName="high"),
        _pod("b", priorityClassName="system-node-critical"),
        _pod("c", priorityClassName="system-cluster-critical"),
        _pod("d"),
    ]
    assert _priorities(pods, [_class("high", 1000)]) == [1000, 2000001000, 2000000000, None]


def test_a_priority_already_set_wins_and_the_input_is_not_modified() -> None:
    read_from_a_cluster = _pod("a", priorityClassName="high", priority=7)
    written = _pod("b", priorityClassName="high")
    assert _priorities([read_from_a_cluster, written], [_class("high", 1000)]) == [7, 1000]
    assert written.spec.priority is None


def test_the_global_default_class_applies_to_pods_without_a_class() -> None:
    classes = [_class("low", -5), _class("normal", 100, globalDefault=True)]
    pods = [_pod("a"), _pod("b", priorityClassName="low")]
    assert _priorities(pods, classes) == [100, -5]


def test_a_missing_class_is_a_note_naming_pod_field_and_class() -> None:
    out = resolve_priorities(
        [_pod("a", priorityClassName="urgent")], PriorityClasses.from_objects([])
    )
    assert [p.spec.priority for p in out.pods] == [0]
    assert out.notes == [
        "Pod team-a/a: spec.priorityClassName: PriorityClass urgent is not in the input (the "
        "API server refuses a pod naming a missing class); scheduled with priority 0, pass "
        "the PriorityClass with -f"
    ]


@pytest.mark.parametrize(
    ("classes", "message"),
    [
        ([_class("high", "1000")], "PriorityClass high, value: must be an integer, not '1000'"),
        ([_class("high", True)], "PriorityClass high, value: must be an integer, not True"),
        (
            [_class("a", 1, globalDefault=True), _class("b", 2, globalDefault=True)],
            "PriorityClass b, globalDefault: PriorityClass a is already the global default",
        ),
        ([{**_class("x", 1), "metadata": {}}], "PriorityClass, metadata.name: Required value"),
    ],
)
def test_a_malformed_class_is_an_error_naming_it_and_the_field(
    classes: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(AllocationError) as info:
        PriorityClasses.from_objects(classes)
    assert str(info.value) == message


def test_the_snapshot_resolves_workload_pods_and_says_what_is_missing() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {
            "replicas": 1,
            "template": {"spec": {"priorityClassName": "high", "containers": []}},
        },
    }
    docs = [
        Document("classes.yaml", 0, _class("high", 1000)),
        Document("web.yaml", 0, deployment),
        Document("pod.yaml", 0, _pod_doc("lost", priorityClassName="gone")),
    ]
    snapshot = build_snapshot(docs)
    assert [p.spec.priority for p in snapshot.pods] == [1000, 0]
    assert snapshot.notes == [
        "Pod team-a/lost: spec.priorityClassName: PriorityClass gone is not in the input (the "
        "API server refuses a pod naming a missing class); scheduled with priority 0, pass "
        "the PriorityClass with -f"
    ]
