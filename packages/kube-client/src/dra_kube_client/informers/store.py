"""One informer's cache: the objects of a collection by ``namespace/name``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from .resources import RawObject

Listener = Callable[[str, str], None]


def object_key(obj: RawObject) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects."""
    meta = obj.get("metadata") or {}
    ns, name = meta.get("namespace"), meta.get("name") or ""
    return f"{ns}/{name}" if ns else str(name)


class Store:
    """Thread-safe objects of one kind; ``version`` grows with every change.

    Readers take :meth:`items` (a copy of the mapping, not of the objects: objects are
    replaced, never mutated, so a reader's view stays consistent).
    """

    def __init__(self, kind: str) -> None:
        """An empty store for ``kind``."""
        self.kind = kind
        self._items: dict[str, RawObject] = {}
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self.version = 0

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(kind, key)`` after every change (``key`` ``*`` after a re-list)."""
        self._listeners.append(listener)

    def _changed(self, key: str) -> None:
        for listener in self._listeners:
            listener(self.kind, key)

    def replace(self, objects: Iterable[RawObject]) -> None:
        """Swap in the result of a full list."""
        fresh = {object_key(o): o for o in objects}
        with self._lock:
            self._items = fresh
            self.version += 1
        self._changed("*")

    def upsert(self, obj: RawObject) -> None:
        """Add or replace one object."""
        key = object_key(obj)
        with self._lock:
            self._items[key] = obj
            self.version += 1
        self._changed(key)

    def delete(self, key: str) -> None:
        """Forget one object (nothing happens if it is not known)."""
        with self._lock:
            if self._items.pop(key, None) is None:
                return
            self.version += 1
        self._changed(key)

    def get(self, key: str) -> RawObject | None:
        """The object of ``key``, if cached."""
        with self._lock:
            return self._items.get(key)

    def items(self) -> dict[str, RawObject]:
        """A copy of the key-to-object mapping."""
        with self._lock:
            return dict(self._items)

    def __len__(self) -> int:
        """How many objects are cached."""
        with self._lock:
            return len(self._items)
