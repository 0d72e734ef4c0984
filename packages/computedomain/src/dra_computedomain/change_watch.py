"""Wake the controller when something it reconciles changes: an informer per collection.

The controller's plan is recomputed from a fresh observation every pass, so it needs no cache
of the watched objects, only to know *when* to run: one
:class:`~dra_kube_client.informers.Informer` per watched collection (keeping only each
object's metadata) lists it, watches from the listed version and sets
:attr:`ChangeWatch.changed` on every change. Bookmarks do not wake it; an expired version
(``410``/``ERROR`` event) means a relist, which does (something may have been missed). The
periodic resync stays the safety net.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence

from dra_kube_client import Backoff, JsonTransport
from dra_kube_client.informers import Informer, Listener, Resource, metadata_only

__all__ = ["ChangeWatch"]


class ChangeWatch:
    """Sets :attr:`changed` whenever one of ``watched`` changes."""

    def __init__(
        self,
        transport: JsonTransport,
        watched: Sequence[Resource],
        *,
        watch_timeout_s: float = 300.0,
        backoff: Callable[[], Backoff] = Backoff,
    ) -> None:
        """``watch_timeout_s``: how long one watch request lasts before it is renewed;
        ``backoff`` makes each informer's retry delays."""
        self.changed = threading.Event()
        self.informers = tuple(
            Informer(
                transport,
                dataclasses.replace(w, transform=metadata_only),
                backoff=backoff(),
                watch_timeout_s=watch_timeout_s,
            )
            for w in watched
        )
        for informer in self.informers:
            informer.store.subscribe(self._listener(informer))

    def _listener(self, informer: Informer) -> Listener:
        def changed(_kind: str, key: str) -> None:
            # The first list is no change: the controller makes a pass at start anyway.
            # A relist is: the events between the two versions are unknown.
            if key != "*" or informer.synced.is_set():
                self.changed.set()

        return changed

    def start(self, stop: threading.Event) -> list[threading.Thread]:
        """One daemon thread per watched collection, until ``stop`` is set."""
        threads = [
            threading.Thread(
                target=i.run, args=(stop,), daemon=True, name=f"watch-{i.resource.path}"
            )
            for i in self.informers
        ]
        for thread in threads:
            thread.start()
        return threads
