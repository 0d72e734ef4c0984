"""The informer layer against a scripted API: list, watch, resume, 410, backoff, bad objects."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from dra_kube_client import KubeApiError
from dra_kube_client.informers import Backoff, Informer, Resource, SharedInformers, trim_pod
from scripted_api import ScriptedApi, obj, page

CLAIMS = Resource("ResourceClaim", "resource.k8s.io/v1", "/claims")


def _informer(api: ScriptedApi, **kw: object) -> Informer:
    return Informer(api, CLAIMS, backoff=Backoff(initial_s=0.0, max_s=0.0, jitter=0.0), **kw)  # type: ignore[arg-type]


def test_list_pages_into_store_and_records_version() -> None:
    api = ScriptedApi(
        lists={
            "/claims": [
                page([obj("ResourceClaim", "a", "5", "ns")], "9", cont="t1"),
                page([obj("ResourceClaim", "b", "7", "ns")], "10"),
            ]
        }
    )
    inf = _informer(api, page_size=1)
    assert inf.list_once() == "10"
    assert sorted(inf.store.items()) == ["ns/a", "ns/b"]
    assert api.calls[1][2] == {"limit": "1", "continue": "t1"}
    assert inf.synced.is_set()
    item = inf.store.get("ns/a")
    assert item is not None
    assert item["apiVersion"] == "resource.k8s.io/v1"


def test_watch_applies_events_and_bookmarks_move_version() -> None:
    api = ScriptedApi(
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
    )
    inf = _informer(api)
    version = inf.watch_once(inf.list_once())
    assert version == "12"
    assert list(inf.store.items()) == ["ns/a"]
    a = inf.store.get("ns/a")
    assert a is not None
    assert a["x"] == 1
    watch_query = api.calls[-1][2]
    assert watch_query == {"resourceVersion": "5", "allowWatchBookmarks": "true"}


def test_run_resumes_from_last_version_then_relists_on_410() -> None:
    stop = threading.Event()
    api = ScriptedApi(
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
    )
    original_watch = api.watch_lines

    def watch_lines(path: str, **kw: object):  # type: ignore[no-untyped-def]
        if not api.watches["/claims"]:
            stop.set()
        return original_watch(path, **kw)  # type: ignore[arg-type]

    api.watch_lines = watch_lines  # type: ignore[method-assign]
    inf = _informer(api)
    inf.run(stop)
    watches = [c for c in api.calls if c[0] == "WATCH"]
    assert watches[0][2]["resourceVersion"] == "5"
    assert watches[1][2]["resourceVersion"] == "6"  # resumed where the stream ended
    assert watches[2][2]["resourceVersion"] == "50"  # after the 410, from the new list
    assert list(inf.store.items()) == ["ns/fresh"]
    assert inf.stats.relists_gone == 1
    assert inf.stats.lists == 2
    assert inf.stats.errors >= 1


def test_410_on_list_continue_restarts_the_list() -> None:
    api = ScriptedApi(
        lists={
            "/claims": [
                page([obj("ResourceClaim", "a", "5", "ns")], "9", cont="t1"),
                KubeApiError("GET", "/claims", 410, "continue expired"),
                page([obj("ResourceClaim", "c", "11", "ns")], "11"),
            ]
        }
    )
    inf = _informer(api)
    assert inf.list_once() == "11"
    assert list(inf.store.items()) == ["ns/c"]


def test_unreadable_objects_are_skipped_with_a_logged_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def check(o: dict[str, Any]) -> None:
        if (o.get("metadata") or {}).get("name") == "bad":
            raise ValueError("spec.devices: not a list")

    api = ScriptedApi(
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
    )
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

    api = ScriptedApi(
        lists={"/claims": [page([obj("ResourceClaim", "a", "1", "ns")], "1")]},
        watches={
            "/claims": [
                [{"type": "MODIFIED", "object": obj("ResourceClaim", "a", "2", "ns", broken=True)}]
            ]
        },
    )
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
    api = ScriptedApi(
        lists={
            "/claims": [page([obj("ResourceClaim", "a", "1", "ns")], "1")],
            "/nodes": [page([obj("Node", "n1", "1"), obj("Node", "n2", "1")], "1")],
        }
    )
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
    api = ScriptedApi()  # every GET is a 404
    inf = Informer(api, rules, backoff=Backoff(initial_s=0.0, max_s=0.0, jitter=0.0))
    thread = threading.Thread(target=inf.run, args=(stop,), daemon=True)
    thread.start()
    assert inf.synced.wait(5)
    stop.set()
    thread.join(5)
    assert len(inf.store) == 0
    assert inf.stats.errors == 0
