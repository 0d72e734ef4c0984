"""KubeTransport against a local HTTP server: JSON requests, typed errors, watch streams."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from dra_kube_client import (
    KubeApiError,
    KubeConfigError,
    KubeTransport,
    path_segment,
    status_fields,
)
from dra_kube_client.testing import Reply, Request, ScriptedServer, write_kubeconfig

EVENTS = [
    {"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "2"}}},
    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}},
]


def _answer(request: Request) -> Reply:
    """A watch streamed in chunks split mid-line, a 410 Status, a POST echo, odd bodies."""
    if request.method == "POST":
        return Reply(201, request.body)
    if "watch=true" in request.path and "resourceVersion=1" in request.path:
        return Reply.lines(EVENTS, chunks=(17,))
    if "watch=true" in request.path:
        return Reply.status_error(410, "too old", reason="Expired")
    if request.path == "/list":
        return Reply.json(200, ["not", "an", "object"])
    if request.path == "/text":
        return Reply(500, b"internal trouble", content_type="text/plain")
    return Reply.status_error(404, "nope", reason="NotFound")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """The scripted stand-in of :func:`_answer`."""
    with ScriptedServer(_answer) as scripted:
        yield scripted


def kubeconfig(tmp_path: Path, url: str) -> Path:
    """A kubeconfig for ``url`` with a bearer token."""
    return write_kubeconfig(tmp_path / "kubeconfig", url=url, token="secret")


def test_requests_send_json_with_the_bearer_token_and_raise_typed_errors(
    server: ScriptedServer, tmp_path: Path
) -> None:
    seen = server.seen
    transport = KubeTransport.from_kubeconfig(str(kubeconfig(tmp_path, server.url)))
    # Tuples are JSON arrays on the wire.
    assert transport.request("POST", "/events", body={"x": (1, 2)}) == {"x": [1, 2]}
    last = seen[-1]
    assert (last.method, last.path) == ("POST", "/events")
    assert last.headers["authorization"] == "Bearer secret"
    assert last.headers["content-type"] == "application/json"
    with pytest.raises(KubeApiError) as err:
        transport.request("GET", "/missing", query={"labelSelector": "a=b"})
    assert (err.value.status, err.value.reason, err.value.message) == (404, "NotFound", "nope")
    assert err.value.path == "/missing"
    assert seen[-1].path == "/missing?labelSelector=a%3Db"
    with pytest.raises(KubeApiError, match="not a JSON object") as err:
        transport.request("GET", "/list")
    assert err.value.status == 200
    with pytest.raises(KubeApiError) as err:
        transport.request("GET", "/text")
    assert (err.value.status, err.value.reason, err.value.message) == (500, "", "internal trouble")
    transport.close()


def test_watch_reassembles_events_across_chunks_and_types_a_410(
    server: ScriptedServer, tmp_path: Path
) -> None:
    seen = server.seen
    transport = KubeTransport.from_kubeconfig(str(kubeconfig(tmp_path, server.url)))
    events = list(transport.watch_lines("/items", query={"resourceVersion": "1"}, timeout_s=7))
    assert events == EVENTS
    assert "timeoutSeconds=7" in seen[-1].path
    assert "watch=true" in seen[-1].path
    # The caller's timeoutSeconds wins over the default from timeout_s.
    with pytest.raises(KubeApiError) as err:
        list(transport.watch_lines("/items", query={"timeoutSeconds": "3"}, timeout_s=7))
    assert (err.value.method, err.value.status, err.value.reason) == ("WATCH", 410, "Expired")
    assert "timeoutSeconds=3" in seen[-1].path


def test_unreachable_server_is_status_0(tmp_path: Path) -> None:
    transport = KubeTransport.from_kubeconfig(str(kubeconfig(tmp_path, "http://127.0.0.1:9")))
    with pytest.raises(KubeApiError) as err:
        transport.request("GET", "/x", timeout_s=2)
    assert (err.value.status, err.value.reason) == (0, "")
    with pytest.raises(KubeApiError) as err:
        list(transport.watch_lines("/x", query={}, timeout_s=1))
    assert (err.value.method, err.value.status) == ("WATCH", 0)


def test_configuration_errors_name_their_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "absent"
    with pytest.raises(KubeConfigError) as err:
        KubeTransport.from_kubeconfig(str(missing))
    assert err.value.source == str(missing)
    # Not in a pod: no service account token, no service host.
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConfigError) as err:
        KubeTransport.from_kubeconfig()
    assert err.value.source == "in-cluster config"
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path, "http://127.0.0.1:9")))
    fallen_back = KubeTransport.from_kubeconfig(fallback=True)
    assert fallen_back.server == "http://127.0.0.1:9"
    with pytest.raises(KubeApiError):
        fallen_back.request("GET", "/x", timeout_s=1)
    monkeypatch.setenv("KUBECONFIG", str(missing))
    with pytest.raises(KubeConfigError) as err:
        KubeTransport.from_kubeconfig(in_cluster=False)
    assert err.value.source == "default kubeconfig"
    assert str(missing) in err.value.message
    # Neither $KUBECONFIG nor --kubeconfig: ~/.kube/config.
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    kubeconfig(tmp_path, "http://127.0.0.1:8").rename(tmp_path / ".kube" / "config")
    assert KubeTransport.from_kubeconfig(in_cluster=False).server == "http://127.0.0.1:8"


def test_status_fields_and_path_segments() -> None:
    body = b'{"kind": "Status", "reason": "Conflict", "message": "changed"}'
    assert status_fields(body) == ("Conflict", "changed")
    assert status_fields(b'{"message": "m"}') == ("", "m")
    assert status_fields(b"x" * 300) == ("", "x" * 200)
    assert status_fields(None) == ("", "")
    assert path_segment("a/b c") == "a%2Fb%20c"
