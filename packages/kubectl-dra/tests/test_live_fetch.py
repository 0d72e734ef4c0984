"""What live explain fetches: every list asked for at once, read back in the lists' order."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from dra_kube_client import KubeApiError
from kubectl_dra.live import _LISTS, LiveClusterError, fetch_with


def _listed(name: str) -> dict[str, Any]:
    """An object as the API server lists it: with its writers' managedFields."""
    return {
        "metadata": {
            "name": name,
            "annotations": {"team": "a"},
            "managedFields": [{"manager": "kube-scheduler", "fieldsV1": {"f:status": {}}}],
        }
    }


class _Lists:
    """Answers each list once every list has been asked for: a fetch that waits for one
    reply before asking for the next never gets one (the barrier breaks)."""

    def __init__(self, failing: Mapping[str, int] | None = None) -> None:
        self.together = threading.Barrier(len(_LISTS), timeout=10)
        self.failing = dict(failing or {})
        self.asked: list[str] = []

    def request(
        self, method: str, path: str, *, query: Mapping[str, str] | None = None, **_: Any
    ) -> dict[str, Any]:
        assert (method, query) == ("GET", None)
        self.asked.append(path)
        self.together.wait()
        if path in self.failing:
            raise KubeApiError(method, path, self.failing[path], "refused")
        name = path.rsplit("/", 1)[-1]
        return {"items": [_listed(f"{name}-{i}") for i in range(2)]}

    def watch_lines(self, path: str, **_: Any) -> Iterator[dict[str, Any]]:
        raise AssertionError("explain does not watch")


def test_the_lists_are_asked_for_together_and_read_in_order() -> None:
    api = _Lists()
    docs = fetch_with(api, namespace="team", pod=None)
    assert sorted(api.asked) == sorted(path for path, _, _ in _LISTS)
    assert [(d.source, d.index) for d in docs] == [
        (path, i) for path, _, _ in _LISTS for i in range(2)
    ]
    assert [d.data["kind"] for d in docs[::2]] == [kind for _, _, kind in _LISTS]


def test_an_optional_list_not_served_is_skipped_and_a_refusal_names_the_first_list() -> None:
    rules = next(path for path, _, kind in _LISTS if kind == "DeviceTaintRule")
    docs = fetch_with(_Lists({rules: 404}), namespace="team", pod=None)
    assert rules not in {d.source for d in docs}
    slices, claims = _LISTS[1][0], _LISTS[2][0]
    with pytest.raises(LiveClusterError, match="resourceslices"):
        fetch_with(_Lists({claims: 403, slices: 403}), namespace="team", pod=None)


def test_managed_fields_are_dropped_as_the_objects_arrive() -> None:
    docs = fetch_with(_Lists(), namespace="team", pod=None)
    assert docs
    assert all("managedFields" not in d.data["metadata"] for d in docs)
    # The rest of the metadata is kept.
    assert all(d.data["metadata"]["annotations"] == {"team": "a"} for d in docs)
