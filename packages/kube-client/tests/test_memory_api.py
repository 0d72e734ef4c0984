"""The in-memory API server: stored objects, versions, selectors, patches, watches."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from dra_kube_client import KubeApiError
from dra_kube_client.testing import MemoryApi, SelectorError, matches, parse_selector

PODS = "/api/v1/namespaces/a/pods"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def pod(name: str, namespace: str = "a", **labels: str) -> dict[str, Any]:
    """A pod with ``labels``."""
    return {"kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels}}


def test_create_get_list_with_selectors_and_versions() -> None:
    api = MemoryApi()
    created = api.request("POST", PODS, body=pod("p1", app="x"))
    assert created["metadata"]["uid"]
    assert created["metadata"]["resourceVersion"] == "1"
    api.put_object("/api/v1/namespaces/b/pods/p2", pod("p2", "b", app="y"))
    generated = api.request("POST", PODS, body={"metadata": {"generateName": "g-"}})
    assert generated["metadata"]["name"].startswith("g-")
    assert api.request("GET", f"{PODS}/p1")["metadata"]["labels"] == {"app": "x"}
    listed = api.request("GET", PODS)
    assert [o["metadata"]["name"] for o in listed["items"]] == [generated["metadata"]["name"], "p1"]
    assert listed["metadata"]["resourceVersion"] == "3"
    everywhere = api.request("GET", "/api/v1/pods", query={"labelSelector": "app"})
    assert [o["metadata"]["name"] for o in everywhere["items"]] == ["p1", "p2"]
    selected = api.request("GET", "/api/v1/pods", query={"labelSelector": "app!=x"})
    assert [o["metadata"]["name"] for o in selected["items"]] == [
        generated["metadata"]["name"],
        "p2",
    ]
    by_field = api.request("GET", "/api/v1/pods", query={"fieldSelector": "metadata.namespace=b"})
    assert [o["metadata"]["name"] for o in by_field["items"]] == ["p2"]
    with pytest.raises(KubeApiError) as err:
        api.request("POST", PODS, body=pod("p1"))
    assert (err.value.status, err.value.reason) == (409, "AlreadyExists")
    with pytest.raises(KubeApiError) as err:
        api.request("GET", f"{PODS}/absent")
    assert (err.value.status, err.value.reason) == (404, "NotFound")
    with pytest.raises(KubeApiError) as err:
        api.request("GET", PODS, query={"labelSelector": "app in (x)"})
    assert err.value.status == 400
    names = [o["metadata"]["name"] for o in api.kind_items("pods")]
    assert names == [generated["metadata"]["name"], "p1", "p2"]  # in path order
    assert ("GET", PODS) in api.requests


def test_updates_conflict_on_a_stale_version_and_patches_apply() -> None:
    api = MemoryApi()
    stored = api.put_object(f"{PODS}/p1", pod("p1"))
    stale = {**stored, "metadata": {**stored["metadata"], "resourceVersion": "0"}}
    with pytest.raises(KubeApiError) as err:
        api.request("PUT", f"{PODS}/p1", body=stale)
    assert (err.value.status, err.value.reason) == (409, "Conflict")
    updated = api.request("PUT", f"{PODS}/p1/status", body={**stored, "status": {"phase": "Up"}})
    assert updated["status"] == {"phase": "Up"}
    assert updated["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]
    merged = api.request(
        "PATCH",
        f"{PODS}/p1",
        body={"metadata": {"labels": {"k": "v"}}, "status": None},
        content_type="application/merge-patch+json",
    )
    assert merged["metadata"]["labels"] == {"k": "v"}
    assert "status" not in merged
    version = merged["metadata"]["resourceVersion"]
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1"}},
    ]
    patched = api.request(
        "PATCH", f"{PODS}/p1", body=ops, content_type="application/json-patch+json"
    )
    assert patched["metadata"]["annotations"] == {"a/b": "1"}
    with pytest.raises(KubeApiError) as err:
        api.request("PATCH", f"{PODS}/p1", body=ops, content_type="application/json-patch+json")
    assert (err.value.status, err.value.reason) == (422, "Invalid")


def test_finalizers_hold_a_delete_until_they_are_removed() -> None:
    api = MemoryApi()
    api.put_object(
        f"{PODS}/p1",
        {**pod("p1"), "metadata": {"name": "p1", "namespace": "a", "finalizers": ["f"]}},
    )
    api.request("DELETE", f"{PODS}/p1")
    held = api.objects[f"{PODS}/p1"]
    assert held["metadata"]["deletionTimestamp"]
    api.request(
        "PATCH",
        f"{PODS}/p1",
        body=[{"op": "remove", "path": "/metadata/finalizers"}],
        content_type="application/json-patch+json",
    )
    assert f"{PODS}/p1" not in api.objects
    events = list(api.watch_lines(PODS, query={"resourceVersion": "1"}, timeout_s=1))
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED", "DELETED"]


def test_injected_failures_answer_once() -> None:
    api = MemoryApi()
    api.fail[("GET", PODS)] = 503
    api.fail[("WATCH", PODS)] = 410
    with pytest.raises(KubeApiError) as err:
        api.request("GET", PODS)
    assert err.value.status == 503
    assert api.request("GET", PODS)["items"] == []
    with pytest.raises(KubeApiError) as err:
        api.watch_lines(PODS, query={}, timeout_s=1)
    assert err.value.status == 410


def test_watches_replay_after_a_version_or_start_from_the_current_objects() -> None:
    api = MemoryApi()
    api.put_object(f"{SLICES}/s1", {"metadata": {"name": "s1"}, "spec": {"nodeName": "n1"}})
    api.put_object(f"{SLICES}/s2", {"metadata": {"name": "s2"}, "spec": {"nodeName": "n2"}})
    mine = {"fieldSelector": "spec.nodeName=n1"}
    current = list(api.watch_lines(SLICES, query=mine, timeout_s=1))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in current] == [("ADDED", "s1")]
    api.request("DELETE", f"{SLICES}/s1")
    replay = list(api.watch_lines(SLICES, query={**mine, "resourceVersion": "2"}, timeout_s=1))
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in replay] == [("DELETED", "s1")]
    with pytest.raises(KubeApiError):
        api.watch_lines(f"{SLICES}/s2", query={}, timeout_s=1)  # not a collection


def test_a_selected_watch_sees_objects_come_into_and_leave_its_selection() -> None:
    """As the API server's watch cache: a change that moves an object out of a field
    selection arrives as DELETED (the object as it was, at the change's version), one that
    moves it in as ADDED; changes outside the selection are not sent."""
    api = MemoryApi()
    pending = {"fieldSelector": "spec.nodeName="}
    api.request("POST", PODS, body=pod("p1"))
    start = api.request("GET", PODS)["metadata"]["resourceVersion"]
    bound = api.request("PATCH", f"{PODS}/p1", body={"spec": {"nodeName": "n1"}})
    api.request("PATCH", f"{PODS}/p1", body={"status": {"phase": "Running"}})
    api.request("PATCH", f"{PODS}/p1", body={"spec": {"nodeName": None}})
    api.request("PATCH", f"{PODS}/p1", body={"metadata": {"labels": {"a": "b"}}})
    events = list(api.watch_lines(PODS, query={**pending, "resourceVersion": start}, timeout_s=1))
    assert [e["type"] for e in events] == ["DELETED", "ADDED", "MODIFIED"]
    gone = events[0]["object"]
    assert "nodeName" not in gone.get("spec", {})  # as it was in the selection
    assert gone["metadata"]["resourceVersion"] == bound["metadata"]["resourceVersion"]
    assert events[2]["object"]["metadata"]["labels"] == {"a": "b"}
    # An unselected watch sees every change as it is.
    everything = list(api.watch_lines(PODS, query={"resourceVersion": start}, timeout_s=1))
    assert [e["type"] for e in everything] == ["MODIFIED"] * 4


def test_a_waiting_watch_streams_events_as_they_happen() -> None:
    api = MemoryApi(watch_wait_s=10)
    stream = api.watch_lines(PODS, query={"resourceVersion": "0"}, timeout_s=10)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(e["type"] for e in stream))
    reader.start()
    api.request("POST", PODS, body=pod("p1"))
    api.request("POST", "/api/v1/namespaces/other/pods", body=pod("q", "other"))
    api.close()  # ends the watch
    reader.join(10)
    assert not reader.is_alive()
    assert got == ["ADDED"]


def test_admit_hook_rejects_or_changes_writes() -> None:
    class Strict(MemoryApi):
        def admit(self, method: str, path: str, obj: dict[str, Any]) -> dict[str, Any]:
            if "spec" not in obj:
                raise KubeApiError(method, path, 422, "spec: Required", reason="Invalid")
            return {**obj, "spec": {**obj["spec"], "admitted": True}}

    api = Strict()
    with pytest.raises(KubeApiError, match="spec: Required"):
        api.request("POST", PODS, body=pod("p1"))
    assert api.request("POST", PODS, body={**pod("p1"), "spec": {}})["spec"] == {"admitted": True}


def test_selector_forms() -> None:
    obj = {"metadata": {"labels": {"a": "1"}}, "spec": {"node": "n"}}
    assert matches(obj, labels=parse_selector("a,a=1,a==1,!b,b!=2"))
    assert not matches(obj, labels=parse_selector("b"))
    assert not matches(obj, labels=parse_selector("!a"))
    assert matches(obj, fields=parse_selector("spec.node=n,spec.other="))
    assert not matches(obj, fields=parse_selector("spec.node!=n"))
    with pytest.raises(SelectorError):
        parse_selector("=1")
