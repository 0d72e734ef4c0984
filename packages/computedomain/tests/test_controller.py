"""Controller reconcile against an in-memory API: create, status, delete, stale cleanup."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from computedomain_support import DRIVER_NS, domain_body
from dra_computedomain.api_paths import collection_path, node_path, object_path
from dra_computedomain.controller import ComputeDomainController
from dra_computedomain.manifests import DaemonSettings
from dra_computedomain.names import CLIQUE_ID_POD_LABEL, COMPUTE_DOMAIN_LABEL, FINALIZER
from dra_kube_client import KubeApiError, LeaderElector
from dra_kube_client.testing import MemoryApi
from template_bytes_api import TemplateBytesApi

SETTINGS = DaemonSettings(namespace=DRIVER_NS, image="driver:1")
CD_PATH = object_path("ComputeDomain", "team-a", "cd1")


NODES = ("node-a", "node-b", "node-c")


def _setup(api: MemoryApi, **kwargs: Any) -> str:
    for node in NODES:
        if node_path(node) not in api.objects:
            api.put_object(node_path(node), {"metadata": {"name": node, "labels": {}}})
    cd = api.put_object(CD_PATH, domain_body(**kwargs))
    return str(cd["metadata"]["uid"])


def _events(api: MemoryApi) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in api.kind_items("events")]


def _daemon_pod(api: MemoryApi, uid: str, node: str, ip: str, *, ready: bool) -> None:
    api.put_object(
        object_path("Pod", DRIVER_NS, f"daemon-{node}"),
        {
            "metadata": {
                "name": f"daemon-{node}",
                "namespace": DRIVER_NS,
                "labels": {COMPUTE_DOMAIN_LABEL: uid, CLIQUE_ID_POD_LABEL: "c.1"},
            },
            "spec": {"nodeName": node},
            "status": {
                "podIP": ip,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        },
    )


def _clique(api: MemoryApi, uid: str, daemons: list[dict[str, Any]]) -> None:
    api.put_object(
        object_path("ComputeDomainClique", DRIVER_NS, f"{uid}.c.1"),
        {
            "apiVersion": "resource.nvidia.com/v1beta1",
            "kind": "ComputeDomainClique",
            "metadata": {
                "name": f"{uid}.c.1",
                "namespace": DRIVER_NS,
                "labels": {COMPUTE_DOMAIN_LABEL: uid},
            },
            "daemons": daemons,
        },
    )


def _entry(node: str, ip: str, index: int, status: str = "Ready") -> dict[str, Any]:
    return {"nodeName": node, "ipAddress": ip, "cliqueID": "c.1", "index": index, "status": status}


def test_first_pass_adds_finalizer_daemonset_and_both_templates(api: MemoryApi) -> None:
    uid = _setup(api)
    ComputeDomainController(api, SETTINGS).reconcile_once()
    cd = api.objects[CD_PATH]
    assert cd["metadata"]["finalizers"] == [FINALIZER]
    assert f"{collection_path('DaemonSet', DRIVER_NS)}/computedomain-daemon-{uid}" in api.objects
    rct_daemon = object_path("ResourceClaimTemplate", DRIVER_NS, f"computedomain-daemon-{uid}")
    rct_workload = object_path("ResourceClaimTemplate", "team-a", "imex-channel-0")
    assert rct_daemon in api.objects
    assert rct_workload in api.objects
    assert cd["status"] == {"status": "NotReady", "nodes": []}
    reasons = [r for _, r in _events(api)]
    assert reasons.count("CreatedResourceClaimTemplate") == 2
    assert "CreatedDaemonSet" in reasons
    # A second pass changes nothing and posts no event twice.
    before = len(api.requests)
    ComputeDomainController(api, SETTINGS).reconcile_once()
    assert [m for m, _ in api.requests[before:] if m != "GET"] == []


def test_status_ready_with_both_nodes_then_pruned_when_a_daemon_pod_goes(
    api: MemoryApi,
) -> None:
    uid = _setup(api)
    controller = ComputeDomainController(api, SETTINGS)
    controller.reconcile_once()
    _clique(api, uid, [_entry("node-a", "10.0.0.1", 0), _entry("node-b", "10.0.0.2", 1)])
    _daemon_pod(api, uid, "node-a", "10.0.0.1", ready=True)
    _daemon_pod(api, uid, "node-b", "10.0.0.2", ready=True)
    controller.reconcile_once()
    status = api.objects[CD_PATH]["status"]
    assert status["status"] == "Ready"
    assert [(n["name"], n["index"], n["status"]) for n in status["nodes"]] == [
        ("node-a", 0, "Ready"),
        ("node-b", 1, "Ready"),
    ]
    assert ("Normal", "Ready") in _events(api)
    # node-b's daemon pod dies without deregistering: its entry is pruned, the domain
    # drops below numNodes and says so.
    del api.objects[object_path("Pod", DRIVER_NS, "daemon-node-b")]
    controller.reconcile_once()
    clique = api.objects[object_path("ComputeDomainClique", DRIVER_NS, f"{uid}.c.1")]
    assert [d["nodeName"] for d in clique["daemons"]] == ["node-a"]
    assert api.objects[CD_PATH]["status"]["status"] == "NotReady"
    assert ("Warning", "NotReady") in _events(api)


def test_a_deleted_node_leaves_the_domain_at_once_with_an_event(api: MemoryApi) -> None:
    uid = _setup(api)
    controller = ComputeDomainController(api, SETTINGS)
    controller.reconcile_once()
    _clique(api, uid, [_entry("node-a", "10.0.0.1", 0), _entry("node-b", "10.0.0.2", 1)])
    _daemon_pod(api, uid, "node-a", "10.0.0.1", ready=True)
    _daemon_pod(api, uid, "node-b", "10.0.0.2", ready=True)
    for node in ("node-a", "node-b"):
        api.objects[node_path(node)]["metadata"]["labels"][COMPUTE_DOMAIN_LABEL] = uid
    controller.reconcile_once()
    assert api.objects[CD_PATH]["status"]["status"] == "Ready"
    # `kubectl delete node node-b` with its kubelet stopped: the node object (and its label)
    # is gone, its daemon pod is still listed until the pod GC removes it.
    del api.objects[node_path("node-b")]
    controller.reconcile_once()
    clique = api.objects[object_path("ComputeDomainClique", DRIVER_NS, f"{uid}.c.1")]
    assert [d["nodeName"] for d in clique["daemons"]] == ["node-a"]
    status = api.objects[CD_PATH]["status"]
    assert status["status"] == "NotReady"
    assert [n["name"] for n in status["nodes"]] == ["node-a"]
    events = [(e["reason"], e["message"]) for e in api.kind_items("events")]
    assert ("NodeLeft", "node node-b is gone; its daemon is dropped") in events
    assert ("Warning", "NotReady") in _events(api)
    # Nothing else is touched: node-a keeps its label, the DaemonSet stays.
    assert api.objects[node_path("node-a")]["metadata"]["labels"][COMPUTE_DOMAIN_LABEL] == uid
    assert api.kind_items("daemonsets")
    # The pod GC removes the orphaned pod later: no further change, no repeated event.
    del api.objects[object_path("Pod", DRIVER_NS, "daemon-node-b")]
    before = len(api.requests)
    controller.reconcile_once()
    assert [m for m, _ in api.requests[before:] if m != "GET"] == []


def test_non_fabric_node_reports_through_its_daemon_pod(api: MemoryApi) -> None:
    uid = _setup(api, num_nodes=1)
    _daemon_pod(api, uid, "node-c", "10.0.0.3", ready=True)
    pod = api.objects[object_path("Pod", DRIVER_NS, "daemon-node-c")]
    pod["metadata"]["labels"][CLIQUE_ID_POD_LABEL] = ""
    ComputeDomainController(api, SETTINGS).reconcile_once()
    status = api.objects[CD_PATH]["status"]
    assert status["status"] == "Ready"
    assert status["nodes"][0]["cliqueID"] == ""


def test_delete_removes_every_object_label_and_finally_the_domain(api: MemoryApi) -> None:
    uid = _setup(api)
    controller = ComputeDomainController(api, SETTINGS)
    controller.reconcile_once()
    _clique(api, uid, [_entry("node-a", "10.0.0.1", 0)])
    for node in ("node-a", "node-b", "node-x"):
        labels = {COMPUTE_DOMAIN_LABEL: uid if node != "node-x" else "other"}
        api.put_object(node_path(node), {"metadata": {"name": node, "labels": labels}})
    api.put_object(
        object_path("ComputeDomain", "team-a", "other"),
        {
            **domain_body("other"),
            "metadata": {"name": "other", "namespace": "team-a", "uid": "other"},
        },
    )
    api.request("DELETE", CD_PATH)
    for _ in range(3):
        controller.reconcile_once()
    assert CD_PATH not in api.objects
    left = [
        p
        for p, o in api.objects.items()
        if (o["metadata"].get("labels") or {}).get(COMPUTE_DOMAIN_LABEL) == uid
    ]
    assert left == []
    assert api.objects[node_path("node-x")]["metadata"]["labels"] == {COMPUTE_DOMAIN_LABEL: "other"}
    assert ("Normal", "Deleted") in _events(api)


def test_template_finalizers_come_off_although_their_parameters_are_immutable(
    api: TemplateBytesApi,
) -> None:
    # NVIDIA's templates carry the finalizer; taking it off must not touch the parameter
    # bytes the API server compares (a patch re-serializes them: refused as immutable).
    uid = _setup(api)
    controller = ComputeDomainController(api, SETTINGS)
    controller.reconcile_once()
    workload = object_path("ResourceClaimTemplate", "team-a", "imex-channel-0")
    assert api.objects[workload]["metadata"]["finalizers"] == [FINALIZER]
    refused = [{"op": "remove", "path": "/metadata/finalizers"}]
    with pytest.raises(KubeApiError) as exc:
        api.request("PATCH", workload, body=refused, content_type="application/json-patch+json")
    assert exc.value.status == 422
    assert "immutable" in str(exc.value)
    # A template left by a Go controller (compact JSON) takes the patch instead.
    go_made = object_path("ResourceClaimTemplate", "team-b", "old")
    made = copy.deepcopy(api.objects[workload])
    made["metadata"].update(name="old", namespace="team-b")
    api.put_object(go_made, made, compact=True)
    api.request("DELETE", CD_PATH)
    for _ in range(3):
        controller.reconcile_once()
    assert CD_PATH not in api.objects
    assert api.kind_items("resourceclaimtemplates") == []
    assert ("PUT", workload) in api.requests
    assert ("PATCH", go_made) in api.requests
    assert uid not in str(api.kind_items("daemonsets"))


def test_stale_objects_and_labels_of_a_vanished_domain_are_cleaned(api: MemoryApi) -> None:
    controller = ComputeDomainController(api, SETTINGS)
    _setup(api)
    controller.reconcile_once()
    # The domain disappears without the controller seeing the deletion (force-deleted).
    cd = api.objects.pop(CD_PATH)
    uid = cd["metadata"]["uid"]
    api.put_object(
        node_path("node-a"), {"metadata": {"name": "node-a", "labels": {COMPUTE_DOMAIN_LABEL: uid}}}
    )
    for _ in range(2):
        controller.reconcile_once()
    left = [
        p
        for p, o in api.objects.items()
        if (o["metadata"].get("labels") or {}).get(COMPUTE_DOMAIN_LABEL) == uid
    ]
    assert left == []
    assert COMPUTE_DOMAIN_LABEL not in api.objects[node_path("node-a")]["metadata"]["labels"]


def test_killed_mid_reconcile_the_next_pass_finishes(api: MemoryApi) -> None:
    uid = _setup(api)
    rct_collection = collection_path("ResourceClaimTemplate", "team-a")
    api.fail[("POST", rct_collection)] = 500
    ComputeDomainController(api, SETTINGS).reconcile_once()
    assert object_path("ResourceClaimTemplate", "team-a", "imex-channel-0") not in api.objects
    # A new controller (the old one was killed) picks up where the first stopped.
    ComputeDomainController(api, SETTINGS).reconcile_once()
    assert object_path("ResourceClaimTemplate", "team-a", "imex-channel-0") in api.objects
    assert len(api.kind_items("daemonsets")) == 1
    assert api.kind_items("daemonsets")[0]["metadata"]["labels"] == {COMPUTE_DOMAIN_LABEL: uid}


def test_template_name_taken_by_a_foreign_object_is_a_warning(api: MemoryApi) -> None:
    api.put_object(
        object_path("ResourceClaimTemplate", "team-a", "imex-channel-0"),
        {
            "metadata": {
                "name": "imex-channel-0",
                "namespace": "team-a",
                "labels": {COMPUTE_DOMAIN_LABEL: "someone-else"},
            }
        },
    )
    _setup(api)
    ComputeDomainController(api, SETTINGS).reconcile_once()
    assert ("Warning", "NameConflict") in _events(api)
    assert api.objects[CD_PATH]["status"]["status"] == "NotReady"


def test_invalid_spec_is_an_event_naming_the_field(api: MemoryApi) -> None:
    _setup(api, template="")
    ComputeDomainController(api, SETTINGS).reconcile_once()
    events = api.kind_items("events")
    assert [e["reason"] for e in events] == ["InvalidSpec"]
    assert "spec.channel.resourceClaimTemplate.name" in events[0]["message"]
    assert api.kind_items("daemonsets") == []


def test_every_request_is_a_declared_permission(api: MemoryApi) -> None:
    from dra_computedomain.api_paths import request_permission
    from dra_computedomain.controller import CLUSTER_REQUESTS, NAMESPACE_REQUESTS

    uid = _setup(api)
    controller = ComputeDomainController(api, SETTINGS)
    controller.reconcile_once()
    _clique(api, uid, [_entry("node-a", "10.0.0.1", 0)])
    api.put_object(
        node_path("node-a"), {"metadata": {"name": "node-a", "labels": {COMPUTE_DOMAIN_LABEL: uid}}}
    )
    controller.reconcile_once()
    api.request("DELETE", CD_PATH)
    for _ in range(3):
        controller.reconcile_once()
    elector = LeaderElector(api, namespace=DRIVER_NS, name="l", identity="a")
    assert elector.step()
    assert elector.step()
    for informer in controller.cache.informers.values():
        informer.watch_once(informer.resource_version)
    used = {request_permission(m, p) for m, p in api.requests if p != CD_PATH or m != "DELETE"}
    declared = CLUSTER_REQUESTS | NAMESPACE_REQUESTS
    assert used <= declared, sorted(used - declared)
    # Nothing declared goes unused in these scenarios but the finalizer patches (the fallback
    # for objects serialized compactly by another client) and clique edits.
    assert declared - used <= {
        ("resource.k8s.io", "resourceclaimtemplates", "patch"),
        ("resource.nvidia.com", "computedomains", "patch"),
        ("apps", "daemonsets", "patch"),
        ("resource.nvidia.com", "computedomaincliques", "patch"),
        ("resource.nvidia.com", "computedomaincliques", "update"),
        ("resource.nvidia.com", "computedomaincliques", "delete"),
    }


def test_host_managed_imex_makes_no_daemons_and_the_domain_is_ready(api: MemoryApi) -> None:
    # imex.mode=hostManaged: the hosts run nvidia-imex; only the workload template is made.
    _setup(api)
    settings = DaemonSettings(namespace=DRIVER_NS, image="driver:1", host_managed_imex=True)
    controller = ComputeDomainController(api, settings)
    controller.reconcile_once()
    assert api.kind_items("daemonsets") == []
    templates = api.kind_items("resourceclaimtemplates")
    assert [(t["metadata"]["namespace"], t["metadata"]["name"]) for t in templates] == [
        ("team-a", "imex-channel-0")
    ]
    status = api.objects[CD_PATH]["status"]
    assert status == {"status": "Ready", "nodes": []}
    api.request("DELETE", CD_PATH)
    for _ in range(3):
        controller.reconcile_once()
    assert CD_PATH not in api.objects
    assert api.kind_items("resourceclaimtemplates") == []


def test_each_reconcile_is_a_debug_line_naming_the_domain(
    api: MemoryApi, caplog: pytest.LogCaptureFixture
) -> None:
    # NVIDIA's controller logs "Processing added or updated ComputeDomain" from -v 2; the
    # chart's logVerbosity (default 4) shows ours, -v 0 hides it.
    uid = _setup(api)
    with caplog.at_level(logging.INFO, logger="dra_computedomain"):
        ComputeDomainController(api, SETTINGS).reconcile_once()
    assert not [r for r in caplog.records if getattr(r, "event", "") == "reconcile"]
    with caplog.at_level(logging.DEBUG, logger="dra_computedomain"):
        ComputeDomainController(api, SETTINGS).reconcile_once()
    lines = [r for r in caplog.records if getattr(r, "event", "") == "reconcile"]
    assert [(r.levelno, getattr(r, "domain_uid", "")) for r in lines] == [(logging.DEBUG, uid)]
