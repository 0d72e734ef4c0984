"""The in-memory API server behind real HTTP, driven by the real transport."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from dra_kube_client import KubeApiError, KubeTransport
from dra_kube_client.testing import MemoryApi, serve_http

NODES = "/api/v1/nodes"


def wait_until(check: Callable[[], bool]) -> None:
    """Poll ``check`` for up to 10 s."""
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_requests_errors_and_watches_round_trip(tmp_path: Path) -> None:
    api = MemoryApi(watch_wait_s=5)
    api.documents["/apis/resource.k8s.io"] = {"kind": "APIGroup", "versions": []}
    with serve_http(api) as front:
        client = KubeTransport.from_kubeconfig(str(front.write_kubeconfig(tmp_path / "kc")))
        assert client.request("GET", "/apis/resource.k8s.io")["kind"] == "APIGroup"
        node = client.request("POST", NODES, body={"metadata": {"name": "n1"}})
        assert node["metadata"]["resourceVersion"] == "1"
        patched = client.request(
            "PATCH",
            f"{NODES}/n1",
            body={"metadata": {"labels": {"x": "1"}}},
            content_type="application/merge-patch+json",
        )
        assert patched["metadata"]["labels"] == {"x": "1"}
        listed = client.request("GET", NODES, query={"labelSelector": "x=1"})
        assert [n["metadata"]["name"] for n in listed["items"]] == ["n1"]
        with pytest.raises(KubeApiError) as err:
            client.request("PUT", f"{NODES}/n1", body={**node})  # the version is stale
        assert (err.value.status, err.value.reason, err.value.message) == (
            409,
            "Conflict",
            "conflict",
        )

        seen: list[str] = []

        def read() -> None:
            for event in client.watch_lines(NODES, query={"resourceVersion": "2"}, timeout_s=5):
                seen.append(event["type"])

        reader = threading.Thread(target=read)
        reader.start()
        wait_until(lambda: ("WATCH", NODES) in api.requests)
        client.request("DELETE", f"{NODES}/n1")
        wait_until(lambda: bool(seen))  # streamed while the watch is open
        api.close()  # the server ends the watch
        reader.join(10)
        assert seen == ["DELETED"]
        client.close()
    assert front.authorizations == {"Bearer test-token"}
    assert ("WATCH", NODES) in api.requests
