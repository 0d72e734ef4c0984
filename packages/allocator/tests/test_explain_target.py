"""The explain target, parsed once, and the cluster built from a snapshot."""

from __future__ import annotations

import pytest
from dra_allocator.cel_engine import CelEngine
from dra_allocator.cluster import Cluster
from dra_allocator.errors import AllocationError
from dra_allocator.explain_report import ExplainTarget, parse_target, target_claims, target_pod
from dra_allocator.nodes import NodeInfo
from dra_allocator.snapshot import Snapshot


@pytest.mark.parametrize(
    ("text", "kind"),
    [("pod/p", "pod"), ("po/p", "pod"), ("Pods/p", "pod"), ("resourceclaim/p", "resourceclaim")],
)
def test_parse_target_kinds(text: str, kind: str) -> None:
    target = parse_target(text, "ns")
    assert target == ExplainTarget(kind, "p", "ns")  # type: ignore[arg-type]
    assert target.pod_name == ("p" if kind == "pod" else None)


@pytest.mark.parametrize("text", ["p", "pod/", "deployment/p"])
def test_parse_target_rejects(text: str) -> None:
    with pytest.raises(AllocationError):
        parse_target(text, "default")


def test_claim_target_has_no_pod_and_missing_claim_is_an_error() -> None:
    target = parse_target("claim/c", "default")
    assert target_pod(Snapshot(), target) is None
    with pytest.raises(AllocationError, match="not found"):
        target_claims(Snapshot(), target)


def test_from_snapshot_knows_the_snapshot_nodes() -> None:
    snapshot = Snapshot(nodes=[NodeInfo(name="b"), NodeInfo(name="a")])
    cluster = Cluster.from_snapshot(snapshot, engine=CelEngine(), timeout_s=1.0)
    assert cluster.node_names() == ["a", "b"]
