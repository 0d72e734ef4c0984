"""The informers of every watched collection, sharing one cache the controller reads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from ..transport import JsonTransport
from .informer import Check, Informer
from .resources import ALL_RESOURCES, Resource
from .store import Listener, Store


class SharedInformers:
    """One informer (and store) per resource; started together, synced together."""

    def __init__(
        self,
        transport: JsonTransport,
        *,
        resources: Sequence[Resource] = ALL_RESOURCES,
        checks: Mapping[str, Check] | None = None,
        make_informer: Callable[..., Informer] = Informer,
    ) -> None:
        """Informers for ``resources``; ``checks`` by kind say which objects are readable."""
        checks = checks or {}
        self.informers = {
            r.kind: make_informer(transport, r, check=checks.get(r.kind)) for r in resources
        }
        self._threads: list[threading.Thread] = []

    def store(self, kind: str) -> Store:
        """The cache of one kind."""
        return self.informers[kind].store

    def subscribe(self, listener: Listener) -> None:
        """Be told of every change of every kind."""
        for informer in self.informers.values():
            informer.store.subscribe(listener)

    def start(self, stop: threading.Event) -> None:
        """Run every informer on a daemon thread of its own until ``stop``."""
        for kind, informer in self.informers.items():
            thread = threading.Thread(
                target=informer.run, args=(stop,), name=f"informer-{kind}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def synced(self) -> bool:
        """Whether every informer has completed its first list."""
        return all(i.synced.is_set() for i in self.informers.values())

    def wait_synced(self, timeout_s: float) -> bool:
        """Wait for every first list; False on timeout."""
        return all(i.synced.wait(timeout_s) for i in self.informers.values())

    def sizes(self) -> dict[str, int]:
        """Objects cached per kind."""
        return {kind: len(i.store) for kind, i in self.informers.items()}
