"""The controller's informer trigger: versions, bookmarks, relists, and passes on change."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from computedomain_support import DRIVER_NS
from dra_computedomain.change_watch import ChangeWatch
from dra_computedomain.controller import ComputeDomainController
from dra_computedomain.manifests import DaemonSettings
from dra_kube_client import Backoff, KubeApiError
from dra_kube_client.informers import Resource
from dra_kube_client.testing import Answer, Call, MemoryApi, MockTransport


def _scripted(streams: list[list[dict[str, Any]]]) -> MockTransport:
    """A list answer with a version, then one scripted watch stream per watch request."""

    def answer(call: Call) -> Answer:
        if call.method != "WATCH":
            return {"metadata": {"resourceVersion": "5"}, "items": []}
        if not streams:
            raise KubeApiError("WATCH", call.path, 0, "connection refused")
        return streams.pop(0)

    return MockTransport(answer)


def _watches(transport: MockTransport) -> list[tuple[str, dict[str, str]]]:
    return [(c.path, dict(c.query)) for c in transport.calls if c.method == "WATCH"]


def _lists(transport: MockTransport) -> int:
    return sum(1 for c in list(transport.calls) if c.method != "WATCH")


def _event(kind: str, version: str) -> dict[str, Any]:
    return {"type": kind, "object": {"metadata": {"name": "n", "resourceVersion": version}}}


NODES = Resource("Node", "v1", "/api/v1/nodes")


def test_watch_starts_at_the_listed_version_and_bookmarks_do_not_wake() -> None:
    transport = _scripted([[_event("BOOKMARK", "6")], [_event("ADDED", "8")]])
    watch = ChangeWatch(transport, [dataclasses.replace(NODES, label_selector="x")])
    (informer,) = watch.informers
    version = informer.watch_once(informer.list_once())
    assert not watch.changed.is_set()  # neither the first list nor a bookmark
    path, query = _watches(transport)[0]
    assert path == "/api/v1/nodes"
    assert query == {"labelSelector": "x", "resourceVersion": "5", "allowWatchBookmarks": "true"}
    assert version == "6"
    informer.watch_once(version)
    assert watch.changed.is_set()
    assert informer.store.get("n") == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "resourceVersion": "8"},
    }  # only metadata is kept


def test_an_expired_watch_relists_and_wakes_the_controller() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    transport = _scripted([[gone]])  # then every watch fails
    watch = ChangeWatch(transport, [NODES], backoff=lambda: Backoff(initial_s=0.01, max_s=0.01))
    stop = threading.Event()
    (thread,) = watch.start(stop)
    assert watch.changed.wait(5)
    stop.set()
    thread.join(5)
    assert _lists(transport) == 2  # relisted after the 410
    assert not thread.is_alive()


def test_a_broken_watch_resumes_from_its_version_without_a_relist() -> None:
    stop = threading.Event()
    transport = _scripted([])  # every watch fails

    def backoff() -> Backoff:
        return Backoff(initial_s=0.0, max_s=0.0, jitter=0.0)

    watch = ChangeWatch(transport, [NODES], backoff=backoff)
    (thread,) = watch.start(stop)
    deadline = time.monotonic() + 30
    while len(_watches(transport)) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    assert {q["resourceVersion"] for _, q in _watches(transport)} == {"5"}
    assert _lists(transport) == 1
    assert not watch.changed.is_set()


def test_controller_runs_a_pass_on_a_change_not_only_on_resync(api: MemoryApi) -> None:
    controller = ComputeDomainController(api, DaemonSettings(namespace=DRIVER_NS, image="i:1"))
    assert {w.path for w in controller.watched()} >= {"/api/v1/nodes"}
    stop, wake = threading.Event(), threading.Event()
    runner = threading.Thread(
        target=controller.run, args=(stop,), kwargs={"interval_s": 60, "wake": wake}
    )
    runner.start()

    def passes() -> int:
        # One list of ComputeDomains per pass.
        return sum(1 for m, p in api.requests if m == "GET" and p.endswith("/computedomains"))

    deadline = time.monotonic() + 30
    while passes() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert passes() == 1
    wake.set()  # a watched change: a pass at once, long before the 60 s resync
    deadline = time.monotonic() + 30
    while passes() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert passes() == 2
    stop.set()
    wake.set()
    runner.join(5)
    assert not runner.is_alive()
