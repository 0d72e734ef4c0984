"""Warning events on a ResourceClaim, posted in the claim's namespace."""

from __future__ import annotations

import asyncio

from dra_kube_client.testing import MemoryApi
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_core.events import KubeEventRecorder, LogEventRecorder

CLAIM = ClaimRef(namespace="team-a", name="channel", uid="uid-1")


def test_a_claim_warning_is_an_event_on_the_claim_in_its_namespace() -> None:
    api = MemoryApi()
    recorder = KubeEventRecorder(api, "node-1", "node-uid", component="compute-domain")
    asyncio.run(recorder.claim_warning(CLAIM, reason="NoNVLinkClique", message="why"))
    (event,) = api.kind_items("events")
    assert event["metadata"]["namespace"] == "team-a"
    assert event["involvedObject"] == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "namespace": "team-a",
        "name": "channel",
        "uid": "uid-1",
    }
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning",
        "NoNVLinkClique",
        "why",
    )
    assert event["source"] == {"component": "compute-domain", "host": "node-1"}
    assert recorder.claim_recorded == [(CLAIM, "NoNVLinkClique", "why")]


def test_node_warnings_still_go_to_the_node_in_default() -> None:
    api = MemoryApi()
    recorder = KubeEventRecorder(api, "node-1", "node-uid", component="gpu")
    asyncio.run(recorder.node_warning(reason="CheckpointMovedAside", message="m"))
    (event,) = api.kind_items("events")
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"]["kind"] == "Node"


def test_without_a_cluster_claim_warnings_are_kept_and_logged() -> None:
    recorder = LogEventRecorder("node-1")
    asyncio.run(recorder.claim_warning(CLAIM, reason="R", message="m"))
    assert recorder.claim_recorded == [(CLAIM, "R", "m")]
    assert recorder.recorded == []
