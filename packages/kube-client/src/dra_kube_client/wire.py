"""What both transports read off the wire the same way: a request's JSON answer and a watch
stream's events (pure: bytes in, objects or typed errors out)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from dra_kube_client.errors import KubeApiError, answer_error

__all__ = ["decode_answer", "watch_events"]


def decode_answer(method: str, path: str, status: int, raw: bytes | None) -> dict[str, Any]:
    """The JSON object of a 2xx answer (``{}`` for an empty body).

    Raises:
        KubeApiError: a non-2xx answer (its ``Status`` fields), or a body that is not a JSON
            object.
    """
    if not 200 <= status < 300:
        raise answer_error(method, path, status, raw)
    try:
        decoded = json.loads(raw) if raw else {}
    except ValueError as exc:
        raise KubeApiError(method, path, status, f"answer is not JSON: {exc}") from exc
    if not isinstance(decoded, dict):
        raise KubeApiError(method, path, status, "answer is not a JSON object")
    return decoded


def watch_events(chunks: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The events of a watch stream, one per complete line, each as soon as its line is whole
    (blank lines and lines that are not JSON objects are skipped).

    Raises:
        ValueError: a line is not JSON.
    """
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                event = json.loads(line)
                if isinstance(event, dict):
                    yield event
