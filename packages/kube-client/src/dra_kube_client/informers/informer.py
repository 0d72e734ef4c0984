"""List + watch of one collection into a :class:`Store`, as client-go's reflector does.

A full list (paged) gives the cache and a resourceVersion; a watch from that version
streams changes (bookmarks only move the version on). A watch that ends is resumed from
the last version seen (after a pause when it brought nothing); ``410 Gone`` (the version was
compacted away) means a fresh list.
Failures wait a bounded, jittered backoff. An object that cannot be read is left out of
the cache with one logged error, never a crash.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..backoff import Backoff
from ..errors import KubeApiError
from ..transport import JsonTransport
from .resources import RawObject, Resource
from .store import Store, object_key

log = logging.getLogger(__name__)

Check = Callable[[RawObject], None]


class WatchExpiredError(Exception):
    """The server no longer has the resourceVersion asked for (HTTP 410 Gone)."""


@dataclass(slots=True)
class InformerStats:
    """Counters the controller exports: lists, watch restarts, objects rejected."""

    lists: int = 0
    watch_restarts: int = 0
    relists_gone: int = 0
    rejected: int = 0
    errors: int = 0


class Informer:
    """Keeps ``store`` equal to the API server's view of ``resource``."""

    def __init__(
        self,
        transport: JsonTransport,
        resource: Resource,
        *,
        store: Store | None = None,
        check: Check | None = None,
        backoff: Backoff | None = None,
        page_size: int = 500,
        watch_timeout_s: float = 300.0,
    ) -> None:
        """Watch ``resource`` through ``transport``; ``check`` raises on unreadable objects."""
        self.transport = transport
        self.resource = resource
        self.store = store if store is not None else Store(resource.kind)
        self.check = check
        self.backoff = backoff if backoff is not None else Backoff()
        self.page_size = page_size
        self.watch_timeout_s = watch_timeout_s
        self.synced = threading.Event()
        self.stats = InformerStats()
        self.resource_version = ""

    def _accept(self, obj: object) -> RawObject | None:
        """The object, typed and trimmed, or None (logged) when it cannot be read."""
        if not isinstance(obj, dict):
            self.stats.rejected += 1
            log.error(
                "object is not a JSON object",
                extra={"event": "object_rejected", "kind": self.resource.kind},
            )
            return None
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        obj = self.resource.transform(obj)
        if self.check is not None:
            try:
                self.check(obj)
            except Exception as exc:  # any parse failure: skip the object, keep running
                self.stats.rejected += 1
                log.error(
                    f"cannot read {self.resource.kind} {object_key(obj)}: {exc}",
                    extra={
                        "event": "object_rejected",
                        "kind": self.resource.kind,
                        "object": object_key(obj),
                        "error": str(exc),
                    },
                )
                return None
        return obj

    def list_once(self) -> str:
        """List every object (page by page) into the store; return the list's version."""
        items: list[RawObject] = []
        cont = ""
        while True:
            query = {**self.resource.selectors, "limit": str(self.page_size)}
            if cont:
                query["continue"] = cont
            try:
                body = self.transport.request("GET", self.resource.path, query=query)
            except KubeApiError as exc:
                if exc.status == 410:
                    # The continue token expired mid-list: start the list again.
                    items, cont = [], ""
                    continue
                raise
            for raw in body.get("items") or []:
                obj = self._accept(raw)
                if obj is not None:
                    items.append(obj)
            meta = body.get("metadata") or {}
            cont = str(meta.get("continue") or "")
            if not cont:
                break
        self.store.replace(items)
        self.stats.lists += 1
        self.resource_version = str(meta.get("resourceVersion") or "")
        self.synced.set()
        log.info(
            f"listed {len(items)} {self.resource.plural}",
            extra={"event": "informer_listed", "kind": self.resource.kind, "count": len(items)},
        )
        return self.resource_version

    def watch_once(self, resource_version: str, stop: threading.Event | None = None) -> str:
        """Apply one watch stream's events; return the last version seen. A set ``stop``
        ends the stream at its next event.

        Raises:
            WatchExpiredError: the version is too old; list again.
            KubeApiError: the watch could not be opened or broke.
        """
        # A randomized timeout spreads the informers' reconnects (client-go does too).
        timeout = self.watch_timeout_s * (1 + random.random())
        query = {
            **self.resource.selectors,
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
        }
        try:
            for event in self.transport.watch_lines(
                self.resource.path, query=query, timeout_s=timeout
            ):
                if stop is not None and stop.is_set():
                    break
                resource_version = self._apply(event, resource_version)
        except KubeApiError as exc:
            if exc.status == 410:
                raise WatchExpiredError(str(exc)) from exc
            raise
        return resource_version

    def _apply(self, event: RawObject, resource_version: str) -> str:
        kind, obj = event.get("type"), event.get("object")
        if kind == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            code = int(status.get("code") or 0)
            if code == 410:
                raise WatchExpiredError(str(status.get("message") or "resource version expired"))
            raise KubeApiError(
                "WATCH", self.resource.path, code, str(status.get("message") or status)
            )
        meta = (obj.get("metadata") if isinstance(obj, dict) else None) or {}
        new_version = str(meta.get("resourceVersion") or resource_version)
        if kind == "BOOKMARK":
            return new_version
        if kind == "DELETED" and isinstance(obj, dict):
            self.store.delete(object_key(obj))
        elif kind in ("ADDED", "MODIFIED"):
            accepted = self._accept(obj)
            if accepted is not None:
                self.store.upsert(accepted)
            elif isinstance(obj, dict):
                # A stale copy would be worse than none: the new state is unreadable.
                self.store.delete(object_key(obj))
        self.resource_version = new_version
        return new_version

    def run(self, stop: threading.Event) -> None:
        """List, then watch and resume, until ``stop`` is set."""
        version: str | None = None
        while not stop.is_set():
            try:
                if version is None:
                    version = self.list_once()
                resumed_from = version
                version = self.watch_once(version, stop)
                self.backoff.reset()
                self.stats.watch_restarts += 1
                if version == resumed_from:
                    # The stream ended without moving the version on (not even a bookmark):
                    # pause before the next one, as client-go does after a "very short
                    # watch", rather than spin on a server or proxy that closes idle watches.
                    stop.wait(self.backoff.jittered(self.backoff.delay(1)))
            except WatchExpiredError as exc:
                self.stats.relists_gone += 1
                self.stats.watch_restarts += 1
                log.info(
                    "watch expired, listing again",
                    extra={
                        "event": "informer_relist",
                        "kind": self.resource.kind,
                        "error": str(exc),
                    },
                )
                version = None
            except KubeApiError as exc:
                if exc.status == 404 and self.resource.optional:
                    # The API is not served here: there are none, and that is a synced state.
                    if not self.synced.is_set() or len(self.store):
                        self.store.replace([])
                        self.synced.set()
                        log.info(
                            f"{self.resource.plural} not served; treated as empty",
                            extra={"event": "informer_not_served", "kind": self.resource.kind},
                        )
                    version = None
                    stop.wait(self.backoff.jittered(self.backoff.max_s))
                    continue
                self.stats.errors += 1
                self.stats.watch_restarts += 1
                delay = self.backoff.next_delay()
                log.warning(
                    f"list/watch of {self.resource.plural} failed: {exc}",
                    extra={
                        "event": "informer_error",
                        "kind": self.resource.kind,
                        "error": str(exc),
                        "retry_s": round(delay, 2),
                    },
                )
                stop.wait(delay)
