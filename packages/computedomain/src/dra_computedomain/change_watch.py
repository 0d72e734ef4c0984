"""Wake the controller when something it reconciles changes: list, then watch from there.

The controller's plan is recomputed from a fresh observation every pass, so it needs no cache
of the watched objects, only to know *when* to run: one thread per watched collection lists
it (for the resourceVersion), watches from that version and sets :attr:`ChangeWatch.changed`
on every event. An expired version (``410``/``ERROR`` event) or a broken stream means a relist,
which sets it too (something may have been missed). The periodic resync stays the safety net.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dra_kube_client import JsonTransport, KubeApiError

__all__ = ["ChangeWatch", "Watched", "resource_version_after"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Watched:
    """One collection to watch: its path and query (e.g. a label selector)."""

    path: str
    query: Mapping[str, str] = field(default_factory=dict)


def resource_version_after(event: Mapping[str, Any], current: str) -> str | None:
    """The version to resume from after ``event``; None when the watch must relist."""
    if event.get("type") == "ERROR":
        return None
    obj = event.get("object") or {}
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version else current


class ChangeWatch:
    """Sets :attr:`changed` whenever one of ``watched`` changes."""

    def __init__(
        self,
        transport: JsonTransport,
        watched: Sequence[Watched],
        *,
        watch_timeout_s: float = 300.0,
        retry_s: float = 1.0,
    ) -> None:
        """``watch_timeout_s``: how long one watch request lasts before it is renewed."""
        self._transport = transport
        self._watched = tuple(watched)
        self._timeout_s = watch_timeout_s
        self._retry_s = retry_s
        self.changed = threading.Event()

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        """One daemon thread per watched collection, until ``stop`` is set."""
        threads = [
            threading.Thread(target=self._loop, args=(w, stop), daemon=True, name=w.path)
            for w in self._watched
        ]
        for thread in threads:
            thread.start()
        return threads

    def _loop(self, watched: Watched, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.watch_once(watched, stop)
            except KubeApiError as exc:
                log.info(
                    "watch ended",
                    extra={"event": "watch_ended", "path": watched.path, "error": str(exc)},
                )
            # A relist follows: what happened meanwhile must not be missed.
            self.changed.set()
            stop.wait(self._retry_s)

    def watch_once(self, watched: Watched, stop: threading.Event) -> None:
        """List ``watched`` for its version, then watch from it until the stream ends."""
        listing = self._transport.request(
            "GET", watched.path, query={**watched.query, "limit": "1"}
        )
        version = str((listing.get("metadata") or {}).get("resourceVersion", ""))
        query = {**watched.query, "resourceVersion": version, "allowWatchBookmarks": "true"}
        for event in self._transport.watch_lines(
            watched.path, query=query, timeout_s=self._timeout_s
        ):
            if stop.is_set():
                return
            after = resource_version_after(event, version)
            if after is None:
                return
            version = after
            if event.get("type") != "BOOKMARK":
                self.changed.set()
