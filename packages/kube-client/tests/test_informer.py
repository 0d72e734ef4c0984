"""The informer layer against scripted answers: list, watch, resume, 410, backoff, bad objects.

The informer is checked against server behaviour a consistent server never shows on cue
(list pages with ``continue`` tokens, a 410 in the middle of a paged list, ``ERROR`` events,
streams that break), so a :class:`MockTransport` replays scripts here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from dra_kube_client import KubeApiError
from dra_kube_client.informers import (
    Backoff,
    Informer,
    Resource,
    SharedInformers,
    metadata_only,
    object_head,
    trim_pod,
)
from dra_kube_client.testing import Answer, Call, MockTransport

CLAIMS = Resource("ResourceClaim", "resource.k8s.io/v1", "/claims")


@dataclass
class Script:
    """Lists answered from ``lists`` (path -> pages), watches from ``watches`` (path -> streams).

    A page or watch event that is a ``KubeApiError`` is raised at that point. The last page of
    a path is answered again and again (a path without pages is a 404); when a path's watch
    streams run out, the watch raises status 0 (as a broken connection) after calling
    ``on_exhausted``.
    """

    lists: dict[str, list[Any]] = field(default_factory=dict)
    watches: dict[str, list[list[Any]]] = field(default_factory=dict)
    on_exhausted: Callable[[], None] = lambda: None

    def answer(self, call: Call) -> Answer:
        """The next page or stream of ``call.path``."""
        if call.method == "WATCH":
            streams = self.watches.get(call.path) or []
            if not streams:
                self.on_exhausted()
                raise KubeApiError("WATCH", call.path, 0, "connection refused")
            return _raising(streams.pop(0))
        assert call.method == "GET", f"the informer only reads: {call.method} {call.path}"
        pages = self.lists.get(call.path)
        if not pages:
            raise KubeApiError(call.method, call.path, 404, "not found", reason="NotFound")
        page_ = pages.pop(0) if len(pages) > 1 else pages[0]
        if isinstance(page_, KubeApiError):
            raise page_
        answer: dict[str, Any] = page_
        return answer

    def transport(self) -> MockTransport:
        """A transport answering from this script."""
        return MockTransport(self.answer)


def _raising(events: list[Any]) -> Iterator[dict[str, Any]]:
    """The events of one stream; a ``KubeApiError`` among them breaks it there."""
    for event in events:
        if isinstance(event, KubeApiError):
            raise event
        yield event


def obj(
    kind: str, name: str, rv: str, namespace: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A minimal object of ``kind`` with ``metadata.resourceVersion``."""
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "uid": f"uid-{name}"}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": kind, "metadata": meta, **extra}


def page(items: list[dict[str, Any]], rv: str, cont: str = "") -> dict[str, Any]:
    """A list answer."""
    meta: dict[str, Any] = {"resourceVersion": rv}
    if cont:
        meta["continue"] = cont
    return {"items": items, "metadata": meta}


def _queries(api: MockTransport, method: str) -> list[dict[str, str]]:
    return [dict(c.query) for c in api.calls if c.method == method]


def _informer(api: MockTransport, **kw: Any) -> Informer:
    return Informer(api, CLAIMS, backoff=Backoff(initial_s=0.0, max_s=0.0, jitter=0.0), **kw)


def test_list_pages_into_store_and_records_version() -> None:
    api = Script(
        lists={
            "/claims": [
                page([obj("ResourceClaim", "a", "5", "ns")], "9", cont="t1"),
                page([obj("ResourceClaim", "b", "7", "ns")], "10"),
            ]
        }
    ).transport()
    inf = _informer(api, page_size=1)
    assert inf.list_once() == "10"
    assert sorted(inf.store.items()) == ["ns/a", "ns/b"]
    assert api.calls[1].query == {"limit": "1", "continue": "t1"}
    assert inf.synced.is_set()
    item = inf.store.get("ns/a")
    assert item is not None
    assert item["apiVersion"] == "resource.k8s.io/v1"


def test_watch_applies_events_and_bookmarks_move_version() -> None:
    api = Script(
        lists={"/claims": [page([obj("ResourceClaim", "a", "5", "ns")], "5")]},
        watches={
            "/claims": [
                [
                    {"type": "ADDED", "object": obj("ResourceClaim", "b", "6", "ns")},
                    {"type": "MODIFIED", "object": obj("ResourceClaim", "a", "7", "ns", x=1)},
                    {"type": "DELETED", "object": obj("ResourceClaim", "b", "8", "ns")},
                    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "12"}}},
                ]
            ]
        },
    ).transport()
    inf = _informer(api)
    version = inf.watch_once(inf.list_once())
    assert version == "12"
    assert list(inf.store.items()) == ["ns/a"]
    a = inf.store.get("ns/a")
    assert a is not None
    assert a["x"] == 1
    watch_query = api.calls[-1].query
    assert watch_query == {"resourceVersion": "5", "allowWatchBookmarks": "true"}


def test_run_resumes_from_last_version_then_relists_on_410() -> None:
    stop = threading.Event()
    script = Script(
        lists={
            "/claims": [
                page([obj("ResourceClaim", "a", "5", "ns")], "5"),
                page([obj("ResourceClaim", "fresh", "50", "ns")], "50"),
            ]
        },
        watches={
            "/claims": [
                [{"type": "ADDED", "object": obj("ResourceClaim", "b", "6", "ns")}],
                [
                    {
                        "type": "ERROR",
                        "object": {"kind": "Status", "code": 410, "message": "too old"},
                    }
                ],
                [KubeApiError("WATCH", "/claims", 500, "boom")],
            ]
        },
        on_exhausted=stop.set,
    )
    api = script.transport()
    inf = _informer(api)
    inf.run(stop)
    watches = _queries(api, "WATCH")
    assert watches[0]["resourceVersion"] == "5"
    assert watches[1]["resourceVersion"] == "6"  # resumed where the stream ended
    assert watches[2]["resourceVersion"] == "50"  # after the 410, from the new list
    assert list(inf.store.items()) == ["ns/fresh"]
    assert inf.stats.relists_gone == 1
    assert inf.stats.lists == 2
    assert inf.stats.errors >= 1


def test_410_on_list_continue_restarts_the_list() -> None:
    api = Script(
        lists={
            "/claims": [
                page([obj("ResourceClaim", "a", "5", "ns")], "9", cont="t1"),
                KubeApiError("GET", "/claims", 410, "continue expired"),
                page([obj("ResourceClaim", "c", "11", "ns")], "11"),
            ]
        }
    ).transport()
    inf = _informer(api)
    assert inf.list_once() == "11"
    assert list(inf.store.items()) == ["ns/c"]


def test_unreadable_objects_are_skipped_with_a_logged_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def check(o: dict[str, Any]) -> None:
        if (o.get("metadata") or {}).get("name") == "bad":
            raise ValueError("spec.devices: not a list")

    api = Script(
        lists={
            "/claims": [
                page(
                    [obj("ResourceClaim", "bad", "1", "ns"), obj("ResourceClaim", "ok", "2", "ns")],
                    "2",
                )
            ]
        },
        watches={
            "/claims": [
                [
                    {
                        "type": "MODIFIED",
                        "object": obj("ResourceClaim", "ok", "3", "ns")
                        | {"metadata": {"name": "bad", "namespace": "ns", "resourceVersion": "3"}},
                    },
                    {"type": "ADDED", "object": "garbage"},
                ]
            ]
        },
    ).transport()
    inf = _informer(api, check=check)
    with caplog.at_level(logging.ERROR):
        inf.watch_once(inf.list_once())
    assert list(inf.store.items()) == ["ns/ok"]
    assert inf.stats.rejected == 3
    assert any(
        "cannot read ResourceClaim ns/bad: spec.devices: not a list" in r.message
        for r in caplog.records
    )


def test_unreadable_update_drops_the_stale_copy() -> None:
    def check(o: dict[str, object]) -> None:
        if o.get("broken"):
            raise ValueError("broken")

    api = Script(
        lists={"/claims": [page([obj("ResourceClaim", "a", "1", "ns")], "1")]},
        watches={
            "/claims": [
                [{"type": "MODIFIED", "object": obj("ResourceClaim", "a", "2", "ns", broken=True)}]
            ]
        },
    ).transport()
    inf = _informer(api, check=check)
    inf.watch_once(inf.list_once())
    assert inf.store.get("ns/a") is None


def test_backoff_is_bounded_and_resets() -> None:
    b = Backoff(initial_s=0.5, max_s=4.0, jitter=0.0)
    delays = [b.next_delay() for _ in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    b.reset()
    assert b.next_delay() == 0.5


def test_trim_pod_keeps_what_diagnosis_reads() -> None:
    pod = {
        "metadata": {"name": "p", "managedFields": [{"x": 1}]},
        "spec": {
            "nodeSelector": {"a": "b"},
            "volumes": [{"name": "v"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
            "containers": [
                {
                    "name": "m",
                    "image": "i",
                    "env": [{"name": "E"}],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled"}],
            "podIP": "1.2.3.4",
        },
    }
    out = trim_pod(pod)
    assert out["spec"] == {
        "nodeSelector": {"a": "b"},
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
        "containers": [{"name": "m", "resources": {"claims": [{"name": "gpu"}]}}],
    }
    assert out["status"] == {"phase": "Pending", "conditions": [{"type": "PodScheduled"}]}
    assert "managedFields" not in out["metadata"]


def test_shared_informers_notify_and_report_sizes() -> None:
    other = Resource("Node", "v1", "/nodes")
    api = Script(
        lists={
            "/claims": [page([obj("ResourceClaim", "a", "1", "ns")], "1")],
            "/nodes": [page([obj("Node", "n1", "1"), obj("Node", "n2", "1")], "1")],
        }
    ).transport()
    shared = SharedInformers(api, resources=(CLAIMS, other))
    seen: list[tuple[str, str]] = []
    shared.subscribe(lambda kind, key: seen.append((kind, key)))
    assert not shared.synced()
    for informer in shared.informers.values():
        informer.list_once()
    assert shared.synced()
    assert shared.sizes() == {"ResourceClaim": 1, "Node": 2}
    assert sorted(seen) == [("Node", "*"), ("ResourceClaim", "*")]


def test_optional_collection_not_served_counts_as_synced_and_empty() -> None:
    rules = Resource("DeviceTaintRule", "resource.k8s.io/v1", "/rules", optional=True)
    stop = threading.Event()
    api = Script().transport()  # every GET is a 404
    inf = Informer(api, rules, backoff=Backoff(initial_s=0.0, max_s=0.0, jitter=0.0))
    thread = threading.Thread(target=inf.run, args=(stop,), daemon=True)
    thread.start()
    assert inf.synced.wait(5)
    stop.set()
    thread.join(5)
    assert len(inf.store) == 0
    assert inf.stats.errors == 0


def test_selectors_narrow_both_the_list_and_the_watch() -> None:
    slices = Resource(
        "ResourceSlice",
        "resource.k8s.io/v1",
        "/slices",
        label_selector="app=x",
        field_selector="spec.nodeName=n1",
    )
    api = Script(lists={"/slices": [page([], "4")]}, watches={"/slices": [[]]}).transport()
    inf = Informer(api, slices)
    assert inf.watch_once(inf.list_once()) == "4"
    selectors = {"labelSelector": "app=x", "fieldSelector": "spec.nodeName=n1"}
    assert _queries(api, "GET") == [{**selectors, "limit": "500"}]
    assert _queries(api, "WATCH") == [
        {**selectors, "resourceVersion": "4", "allowWatchBookmarks": "true"}
    ]
    assert CLAIMS.selectors == {}


def test_a_set_stop_ends_the_stream_at_its_next_event() -> None:
    stop = threading.Event()
    api = Script(
        lists={"/claims": [page([], "1")]},
        watches={
            "/claims": [
                [
                    {"type": "ADDED", "object": obj("ResourceClaim", "a", "2", "ns")},
                    {"type": "ADDED", "object": obj("ResourceClaim", "b", "3", "ns")},
                ]
            ]
        },
    ).transport()
    inf = _informer(api)
    version = inf.list_once()
    inf.store.subscribe(lambda kind, key: stop.set())  # stop once the first event is applied
    assert inf.watch_once(version, stop) == "2"
    assert list(inf.store.items()) == ["ns/a"]


def test_metadata_only_keeps_what_names_the_object_and_its_version() -> None:
    full = obj("Node", "n1", "7", apiVersion="v1", spec={"x": 1})
    full["metadata"]["managedFields"] = [{"m": 1}]
    assert metadata_only(full) == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "uid": "uid-n1", "resourceVersion": "7"},
    }


def test_object_head_is_a_new_object_with_the_named_metadata_only() -> None:
    full = obj("Node", "n1", "7", apiVersion="v1", spec={"x": 1})
    full["metadata"]["labels"] = {"a": "b"}
    head = object_head(full, ("name", "labels", "absent"))
    assert head == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": {"a": "b"}},
    }
    head["metadata"]["name"] = "changed"
    assert full["metadata"]["name"] == "n1", "the head is a new metadata dict"


class _RecordingStop(threading.Event):
    """A stop event that records how long the informer waits on it, and waits no time."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout)
        return self.is_set()


def test_a_stream_that_brings_nothing_pauses_before_the_next_watch() -> None:
    stop = _RecordingStop()
    bookmark = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "2"}}}
    api = Script(
        lists={"/claims": [page([], "1")]},
        watches={"/claims": [[], [bookmark]]},
        on_exhausted=stop.set,
    ).transport()
    inf = Informer(api, CLAIMS, backoff=Backoff(initial_s=0.25, max_s=1.0, jitter=0.0))
    inf.run(stop)
    assert [q["resourceVersion"] for q in _queries(api, "WATCH")] == ["1", "1", "2"]
    # A pause after the empty stream, none after the bookmark; then the broken third watch's
    # backoff.
    assert stop.waits == [0.25, 0.25]
