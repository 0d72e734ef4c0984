"""The informers over the real transport (``dra_kube_client``) and a local HTTP server.

The transport itself is tested in ``packages/kube-client``; this checks the informer's use of
it: list, watch streamed in chunks, bookmarks, a 410 on watch as WatchExpiredError.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_kube_client import KubeTransport
from dra_kube_client.informers import Informer, Resource, WatchExpiredError
from dra_kube_client.testing import Reply, Request, ScriptedServer

EVENTS = [
    {
        "type": "ADDED",
        "object": {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "2"}},
    },
    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
]


def _answer(request: Request) -> Reply:
    """A list, a watch streamed in chunks, a 410 on any other watch, a POST echo."""
    if request.method == "POST":
        return Reply(201, request.body)
    if "watch=true" in request.path and "resourceVersion=1" in request.path:
        # Split mid-line: the transport must reassemble events across chunks.
        return Reply.lines(EVENTS, chunks=(17,))
    if "watch=true" in request.path:
        return Reply.status_error(410, "too old resource version")
    if request.path.startswith("/items"):
        return Reply.json(200, {"items": [], "metadata": {"resourceVersion": "1"}})
    return Reply.status_error(404, "nope")


def test_informer_lists_and_watches_through_the_transport(tmp_path: Path) -> None:
    with ScriptedServer(_answer) as server:
        transport = KubeTransport.from_kubeconfig(
            str(server.write_kubeconfig(tmp_path / "kubeconfig", token="secret"))
        )
        informer = Informer(transport, Resource("Thing", "v1", "/items"))
        assert informer.watch_once(informer.list_once()) == "3"
        assert list(informer.store.items()) == ["ns/a"]
        assert any("allowWatchBookmarks=true" in r.path for r in server.seen)
        assert all(r.headers["authorization"] == "Bearer secret" for r in server.seen)
        assert transport.request("POST", "/events", body={"x": 1}) == {"x": 1}
        with pytest.raises(WatchExpiredError):
            informer.watch_once("999")
