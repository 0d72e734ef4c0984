"""MockTransport: a handler answers each call; bodies and answers go through JSON."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dra_kube_client import JsonTransport, KubeApiError
from dra_kube_client.testing import Answer, Call, MockTransport


def _answer(call: Call) -> Answer:
    if call.method == "WATCH":
        return [{"type": "ADDED", "object": {"metadata": {"name": "n1"}}}]
    if call.path.endswith("/missing"):
        raise KubeApiError(call.method, call.path, 404, "not found", reason="NotFound")
    return {"echo": call.body, "query": dict(call.query)}


def test_requests_are_answered_by_the_handler_and_recorded() -> None:
    transport: JsonTransport = MockTransport(_answer)
    body = {"metadata": {"name": "x"}}
    answer = transport.request("POST", "/api/v1/nodes", body=body, query={"dryRun": "All"})
    assert answer == {"echo": body, "query": {"dryRun": "All"}}
    body["metadata"]["name"] = "changed"  # the recorded body is what was sent
    assert isinstance(transport, MockTransport)
    (call,) = transport.calls
    assert (call.method, call.path, call.body) == (
        "POST",
        "/api/v1/nodes",
        {"metadata": {"name": "x"}},
    )
    with pytest.raises(KubeApiError) as err:
        transport.request("GET", "/api/v1/nodes/missing")
    assert (err.value.status, err.value.reason) == (404, "NotFound")


def test_answers_are_fresh_objects_as_decoded_json() -> None:
    stored: dict[str, Any] = {"spec": {"a": 1}}
    transport = MockTransport(lambda _call: stored)
    transport.request("GET", "/x")["spec"]["a"] = 2
    assert stored == {"spec": {"a": 1}}


def test_a_body_that_is_not_json_is_refused() -> None:
    transport = MockTransport(_answer)
    with pytest.raises(TypeError):
        transport.request("POST", "/x", body={"when": object()})


def test_watches_stream_the_handlers_events_from_the_first_next() -> None:
    transport = MockTransport(_answer)
    stream = transport.watch_lines("/api/v1/nodes", query={"resourceVersion": "5"}, timeout_s=3)
    assert transport.calls == []  # not started yet, as a real watch
    assert [e["object"]["metadata"]["name"] for e in stream] == ["n1"]
    assert transport.calls == [
        Call("WATCH", "/api/v1/nodes", {"resourceVersion": "5"}, None, "", 3)
    ]


def test_a_stream_that_breaks_raises_where_it_breaks() -> None:
    def broken() -> Iterator[dict[str, Any]]:
        yield {"type": "ADDED", "object": {}}
        raise KubeApiError("WATCH", "/p", 0, "connection reset")

    transport = MockTransport(lambda _call: broken())
    stream = transport.watch_lines("/p", query={}, timeout_s=1)
    assert next(stream) == {"type": "ADDED", "object": {}}
    with pytest.raises(KubeApiError, match="connection reset"):
        next(stream)


def test_the_wrong_kind_of_answer_is_a_type_error() -> None:
    transport = MockTransport(lambda call: [] if call.method != "WATCH" else {"kind": "Status"})
    with pytest.raises(TypeError, match="GET /x"):
        transport.request("GET", "/x")
    with pytest.raises(TypeError, match="WATCH /x"):
        list(transport.watch_lines("/x", query={}, timeout_s=1))
    transport.close()
    assert transport.closed
