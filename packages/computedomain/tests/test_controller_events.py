"""The controller at scale: it reacts to changes from its caches, coalesces bursts, lists
nothing per event (requests counted on the in-memory API server)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from computedomain_support import DRIVER_NS, domain_body
from dra_computedomain.api_paths import node_path, object_path, request_permission
from dra_computedomain.controller import ComputeDomainController
from dra_computedomain.controller_cache import CACHED_KINDS
from dra_computedomain.manifests import DaemonSettings
from dra_computedomain.names import CLIQUE_ID_POD_LABEL, COMPUTE_DOMAIN_LABEL
from dra_computedomain.work_queue import KeyQueue
from dra_kube_client.testing import MemoryApi

SETTINGS = DaemonSettings(namespace=DRIVER_NS, image="driver:1")
NODE_COUNT = 2000
MERGE = "application/merge-patch+json"


def _node(name: str, *, heartbeat: int = 0, label: str = "") -> dict[str, Any]:
    labels = {COMPUTE_DOMAIN_LABEL: label} if label else {}
    return {
        "metadata": {"name": name, "labels": {"zone": "z1", **labels}},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": f"t{heartbeat}"}
            ]
        },
    }


def _nodes(api: MemoryApi, count: int = NODE_COUNT) -> None:
    for i in range(count):
        api.put_object(node_path(f"node-{i}"), _node(f"node-{i}"))


def _heartbeats(api: MemoryApi, count: int, *, nodes: int = NODE_COUNT) -> None:
    """``count`` node status updates (the kubelet's heartbeats), spread over the nodes."""
    for i in range(count):
        name = f"node-{(i * 7) % nodes}"
        api.request("PUT", node_path(name), body=_node(name, heartbeat=i + 1))


def _domain(api: MemoryApi, name: str, namespace: str = "team-a") -> str:
    body = domain_body(name, namespace)
    cd = api.put_object(object_path("ComputeDomain", namespace, name), body)
    return str(cd["metadata"]["uid"])


def _clique(api: MemoryApi, uid: str, nodes: list[str]) -> None:
    daemons = [
        {"nodeName": n, "ipAddress": f"10.0.0.{i}", "cliqueID": "c.1", "index": i}
        | {"status": "Ready"}
        for i, n in enumerate(nodes)
    ]
    api.put_object(
        object_path("ComputeDomainClique", DRIVER_NS, f"{uid}.c.1"),
        {
            "metadata": {
                "name": f"{uid}.c.1",
                "namespace": DRIVER_NS,
                "labels": {COMPUTE_DOMAIN_LABEL: uid},
            },
            "daemons": daemons,
        },
    )
    for i, node in enumerate(nodes):
        api.put_object(
            object_path("Pod", DRIVER_NS, f"daemon-{uid}-{node}"),
            {
                "metadata": {
                    "name": f"daemon-{uid}-{node}",
                    "namespace": DRIVER_NS,
                    "labels": {COMPUTE_DOMAIN_LABEL: uid, CLIQUE_ID_POD_LABEL: "c.1"},
                },
                "spec": {"nodeName": node},
                "status": {
                    "podIP": f"10.0.0.{i}",
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )


def _lists(requests: list[tuple[str, str]]) -> list[str]:
    return [p for m, p in requests if m == "GET" and request_permission(m, p)[2] == "list"]


def _catch_up(controller: ComputeDomainController) -> None:
    """Apply the watch events since each cache's version (the in-memory server replays them
    and ends the stream: a single-threaded stand-in for the informer threads)."""
    for informer in controller.cache.informers.values():
        informer.watch_once(informer.resource_version)


@pytest.fixture
def synced() -> Callable[[MemoryApi], ComputeDomainController]:
    """A controller whose caches are listed and whose domains are reconciled once."""

    def make(api: MemoryApi) -> ComputeDomainController:
        controller = ComputeDomainController(api, SETTINGS, queue=KeyQueue())
        controller.reconcile_once()
        _catch_up(controller)  # its own writes
        controller.process_ready()
        controller.reconciles.clear()
        return controller

    return make


def test_node_heartbeats_without_domains_cost_no_request(
    synced: Callable[[MemoryApi], ComputeDomainController],
) -> None:
    api = MemoryApi()
    _nodes(api)
    controller = synced(api)
    # The initial sync: one list per cached collection, nothing else.
    assert len(_lists(api.requests)) == len(CACHED_KINDS)
    before = len(api.requests)
    _heartbeats(api, 100)
    _catch_up(controller)
    assert controller.process_ready() == 0
    mine = [r for r in api.requests[before:] if r[0] != "PUT"]  # the PUTs: the heartbeats
    assert {m for m, _ in mine} == {"WATCH"}
    assert len(mine) == len(CACHED_KINDS)
    assert _lists(api.requests[before:]) == []
    assert not controller.reconciles


def test_a_node_event_reconciles_only_the_domains_it_concerns(
    synced: Callable[[MemoryApi], ComputeDomainController],
) -> None:
    api = MemoryApi()
    _nodes(api)
    a, b = _domain(api, "cd-a"), _domain(api, "cd-b", "team-b")
    _clique(api, a, ["node-1", "node-2"])
    _clique(api, b, ["node-3", "node-4"])
    controller = synced(api)
    assert api.objects[object_path("ComputeDomain", "team-a", "cd-a")]["status"]["status"] == (
        "Ready"
    )
    before = len(api.requests)
    # A heartbeat of a node in a's clique changes nothing the plan reads: no reconcile.
    _heartbeats(api, 3, nodes=3)
    _catch_up(controller)
    assert controller.process_ready() == 0
    # node-1 leaves the cluster: a (whose daemon it ran) is reconciled, b is not.
    api.request("DELETE", node_path("node-1"))
    _catch_up(controller)
    start = len(api.requests)
    assert controller.process_ready() == 1
    assert controller.reconciles == {a: 1}
    clique_path = object_path("ComputeDomainClique", DRIVER_NS, f"{a}.c.1")
    assert sorted(set(api.requests[start:])) == [
        ("GET", clique_path),
        ("PATCH", object_path("ComputeDomain", "team-a", "cd-a") + "/status"),
        ("POST", "/api/v1/namespaces/team-a/events"),
        ("PUT", clique_path),
    ]
    clique = api.objects[object_path("ComputeDomainClique", DRIVER_NS, f"{a}.c.1")]
    assert [d["nodeName"] for d in clique["daemons"]] == ["node-2"]
    assert api.objects[object_path("ComputeDomain", "team-a", "cd-a")]["status"]["status"] == (
        "NotReady"
    )
    # Its own writes (clique, status) come back as events about a alone.
    _catch_up(controller)
    controller.process_ready()
    assert set(controller.reconciles) == {a}
    controller.reconciles.clear()
    # A node that takes b's label concerns b alone.
    api.request("PUT", node_path("node-9"), body=_node("node-9", label=b))
    _catch_up(controller)
    start = len(api.requests)
    assert controller.process_ready() == 1
    assert controller.reconciles == {b: 1}
    assert api.requests[start:] == []  # b has nothing to do: read from the caches only
    assert _lists(api.requests[before:]) == []


def test_a_burst_of_changes_to_one_domain_is_one_reconcile(
    synced: Callable[[MemoryApi], ComputeDomainController],
) -> None:
    api = MemoryApi()
    _nodes(api, 10)
    uid = _domain(api, "cd1")
    other = _domain(api, "cd2", "team-b")
    controller = synced(api)
    before = len(api.requests)
    path = object_path("ComputeDomain", "team-a", "cd1")
    for i in range(50):
        body = {"metadata": {"annotations": {"burst": str(i)}}}
        api.request("PATCH", path, body=body, content_type=MERGE)
    _catch_up(controller)
    assert controller.process_ready() == 1
    assert controller.reconciles == {uid: 1}
    assert other not in controller.reconciles
    assert _lists(api.requests[before:]) == []


def test_the_queue_holds_a_key_so_a_burst_spread_in_time_folds() -> None:
    now = [0.0]
    queue = KeyQueue(delay_s=0.1, clock=lambda: now[0])
    for i in range(50):
        now[0] = i * 0.001
        queue.add(["uid-1"])
    assert queue.pop_ready() is None  # held
    now[0] = 0.2
    assert queue.pop_ready() == "uid-1"
    queue.add(["uid-1"])  # a change while it is reconciled: once more, after
    assert queue.pop_ready() is None
    queue.done("uid-1")
    now[0] = 0.4
    assert queue.pop_ready() == "uid-1"
    queue.done("uid-1")
    assert len(queue) == 0


def test_running_controller_lists_once_then_follows_watches() -> None:
    api = MemoryApi(watch_wait_s=0.5)
    nodes = 200
    _nodes(api, nodes)
    uid = _domain(api, "cd1")
    controller = ComputeDomainController(api, SETTINGS, queue=KeyQueue(delay_s=0.3))
    stop = threading.Event()
    runner = threading.Thread(target=controller.run, args=(stop,), kwargs={"interval_s": 600})
    runner.start()
    try:
        status_path = object_path("ComputeDomain", "team-a", "cd1")
        _wait(lambda: "status" in api.objects[status_path])
        _wait(lambda: len(controller.queue) == 0 and controller.reconciles[uid] >= 1)
        time.sleep(0.5)  # its own writes come back as events: reconciled, nothing to do
        first = controller.reconciles[uid]
        listed = len(_lists(api.requests))
        assert listed == len(CACHED_KINDS)
        _heartbeats(api, 100, nodes=nodes)
        node_informer = controller.cache.informers["Node"]
        _wait(lambda: int(node_informer.resource_version) >= int(_version(api)))
        for i in range(50):
            body = {"metadata": {"annotations": {"burst": str(i)}}}
            api.request("PATCH", status_path, body=body, content_type=MERGE)
        _wait(lambda: controller.reconciles[uid] > first)
        time.sleep(0.6)
        assert controller.reconciles[uid] == first + 1
        assert len(_lists(api.requests)) == listed
    finally:
        stop.set()
        api.close()
        runner.join(10)
    assert not runner.is_alive()


def _version(api: MemoryApi) -> str:
    with api.cond:
        return str(max(int(o["metadata"]["resourceVersion"]) for o in api.objects.values()))


def _wait(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class SlowDomainList(MemoryApi):
    """Answers the list of ComputeDomains late, as a busy API server may."""

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        if method == "GET" and path.endswith("/computedomains"):
            time.sleep(0.5)
        return super().request(method, path, **kwargs)


def test_a_restarted_controller_deletes_nothing_before_it_has_listed_the_domains() -> None:
    api = SlowDomainList(watch_wait_s=0.5)
    _nodes(api, 3)
    uid = _domain(api, "cd1")
    ComputeDomainController(api, SETTINGS).reconcile_once()  # the previous controller's work
    assert api.kind_items("daemonsets")
    before = len(api.requests)
    controller = ComputeDomainController(api, SETTINGS, queue=KeyQueue())
    stop = threading.Event()
    runner = threading.Thread(target=controller.run, args=(stop,), kwargs={"interval_s": 600})
    runner.start()
    try:
        _wait(lambda: controller.reconciles[uid] >= 1)
    finally:
        stop.set()
        api.close()
        runner.join(10)
    assert [p for m, p in api.requests[before:] if m == "DELETE"] == []
    assert api.kind_items("daemonsets")
