"""A scripted :class:`dra_kube_client.JsonTransport` for the informer tests.

The informer is checked against server behaviour a consistent server never shows on cue:
list pages with ``continue`` tokens, a 410 in the middle of a paged list, ``ERROR`` events,
streams that break. So these tests replay scripts; every test that needs a server that keeps
objects uses the shared :class:`dra_kube_client.testing.MemoryApi` instead.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_kube_client import KubeApiError


@dataclass
class ScriptedApi:
    """Lists answered from ``lists`` (path -> pages), watches from ``watches`` (path -> scripts).

    A page or watch event that is a ``KubeApiError`` is raised at that point. The last page of
    a path is answered again and again; when a path's watch scripts run out, the watch raises
    status 0 (as a broken connection).
    """

    lists: dict[str, list[Any]] = field(default_factory=dict)
    watches: dict[str, list[list[Any]]] = field(default_factory=dict)
    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        timeout_s: float = 30.0,
    ) -> dict[str, Any]:
        """Answer the next list page of ``path``."""
        self.calls.append((method, path, dict(query or {})))
        assert method == "GET", f"the informer only reads: {method} {path}"
        pages = self.lists.get(path)
        if not pages:
            raise KubeApiError(method, path, 404, "not found", reason="NotFound")
        page = pages.pop(0) if len(pages) > 1 else pages[0]
        if isinstance(page, KubeApiError):
            raise page
        result: dict[str, Any] = page
        return result

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Replay the next script of ``path``."""
        self.calls.append(("WATCH", path, dict(query)))
        scripts = self.watches.get(path) or []
        if not scripts:
            raise KubeApiError("WATCH", path, 0, "connection refused")
        for event in scripts.pop(0):
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
