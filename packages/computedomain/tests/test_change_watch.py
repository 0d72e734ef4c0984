"""The controller's list+watch trigger: versions, bookmarks, relists, and passes on change."""

from __future__ import annotations

import threading
import time
from typing import Any

from computedomain_support import DRIVER_NS
from dra_computedomain.change_watch import ChangeWatch, Watched, resource_version_after
from dra_computedomain.controller import ComputeDomainController
from dra_computedomain.manifests import DaemonSettings
from dra_kube_client import KubeApiError
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
    return {"type": kind, "object": {"metadata": {"resourceVersion": version}}}


def test_version_follows_events_and_an_error_means_relist() -> None:
    assert resource_version_after(_event("MODIFIED", "7"), "5") == "7"
    assert resource_version_after(_event("BOOKMARK", "9"), "7") == "9"
    assert resource_version_after({"type": "ADDED", "object": {}}, "7") == "7"
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410}}
    assert resource_version_after(gone, "7") is None


def test_watch_starts_at_the_listed_version_and_bookmarks_do_not_wake() -> None:
    transport = _scripted([[_event("BOOKMARK", "6")], [_event("ADDED", "8")]])
    watch = ChangeWatch(transport, [Watched("/api/v1/nodes", {"labelSelector": "x"})])
    stop = threading.Event()
    watch.watch_once(Watched("/api/v1/nodes", {"labelSelector": "x"}), stop)
    assert not watch.changed.is_set()
    path, query = _watches(transport)[0]
    assert path == "/api/v1/nodes"
    assert query == {"labelSelector": "x", "resourceVersion": "5", "allowWatchBookmarks": "true"}
    watch.watch_once(Watched("/api/v1/nodes"), stop)
    assert watch.changed.is_set()


def test_a_broken_watch_relists_and_wakes_the_controller() -> None:
    transport = _scripted([])  # every watch fails
    watch = ChangeWatch(transport, [Watched("/api/v1/nodes")], retry_s=0.01)
    stop = threading.Event()
    (thread,) = watch.start(stop)
    assert watch.changed.wait(5)
    deadline = time.monotonic() + 30
    while _lists(transport) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(5)
    assert _lists(transport) >= 2  # relisted after the failure
    assert not thread.is_alive()


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
