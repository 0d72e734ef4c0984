"""The answer and watch-stream decoding both transports share."""

from __future__ import annotations

import pytest
from dra_kube_client.errors import KubeApiError
from dra_kube_client.wire import decode_answer, watch_events


def test_an_answer_decodes_to_its_object_and_an_empty_body_to_nothing() -> None:
    assert decode_answer("GET", "/api/v1/nodes/n", 200, b'{"kind": "Node"}') == {"kind": "Node"}
    assert decode_answer("DELETE", "/x", 200, b"") == {}


def test_a_refusal_carries_the_status_fields_and_a_bad_body_is_named() -> None:
    body = b'{"kind": "Status", "reason": "NotFound", "message": "nodes \\"n\\" not found"}'
    with pytest.raises(KubeApiError) as refused:
        decode_answer("GET", "/api/v1/nodes/n", 404, body)
    assert (refused.value.status, refused.value.reason) == (404, "NotFound")
    with pytest.raises(KubeApiError, match="not JSON"):
        decode_answer("GET", "/x", 200, b"<html>")
    with pytest.raises(KubeApiError, match="not a JSON object"):
        decode_answer("GET", "/x", 200, b"[1]")


def test_watch_events_are_whole_lines_however_the_stream_is_cut() -> None:
    chunks = [b'{"type": "ADD', b'ED", "object": {}}\n\n{"type": "DEL', b'ETED"}\n[1]\n{"ty']
    assert list(watch_events(chunks)) == [{"type": "ADDED", "object": {}}, {"type": "DELETED"}]
    with pytest.raises(ValueError, match="Expecting value"):
        list(watch_events([b"not json\n"]))


def test_any_2xx_is_an_answer_and_300_is_not() -> None:
    assert decode_answer("POST", "/api/v1/namespaces/n/events", 201, b'{"kind": "Event"}') == {
        "kind": "Event"
    }
    assert decode_answer("DELETE", "/x", 204, None) == {}
    assert decode_answer("PATCH", "/x", 299, b"{}") == {}
    with pytest.raises(KubeApiError) as moved:
        decode_answer("GET", "/x", 300, b"")
    assert (moved.value.status, moved.value.reason) == (300, "")


def test_a_refusal_without_a_status_body_names_the_body() -> None:
    with pytest.raises(KubeApiError, match="upstream connect error") as refused:
        decode_answer("GET", "/x", 503, b"upstream connect error")
    assert (refused.value.status, refused.value.reason) == (503, "")


def test_a_line_cut_anywhere_even_inside_a_character_is_read_once_whole() -> None:
    line = '{"type": "BOOKMARK", "object": {"metadata": {"name": "é"}}}\r\n'.encode()
    for cut in range(1, len(line)):
        chunks = [line[:cut], b"", line[cut:]]
        assert list(watch_events(chunks)) == [
            {"type": "BOOKMARK", "object": {"metadata": {"name": "é"}}}
        ]


def test_a_last_line_without_its_newline_is_not_an_event() -> None:
    # The stream ended (the server's timeout, a broken connection) before the line was whole.
    assert list(watch_events([b'{"type": "ADDED"}\n{"type": "MODIFIED"}'])) == [{"type": "ADDED"}]
