"""An in-memory API server: the test double every package's unit tests share.

Objects are stored by path. ``resourceVersion`` is one counter for all objects, checked on
PUT and by JSON-patch ``test`` ops, so optimistic-concurrency paths run as against a real
server; every write is an event that watches replay after a ``resourceVersion``. A watch
with a selector sees an object that comes into its selection as ``ADDED`` and one that
leaves it as ``DELETED`` (the object as it was, at the new ``resourceVersion``), as the API
server's watch cache sends them.
"""

from __future__ import annotations

import copy
import re
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from dra_kube_client.errors import KubeApiError
from dra_kube_client.testing.selectors import (
    Requirement,
    SelectorError,
    matches,
    parse_selector,
)

__all__ = ["Hold", "MemoryApi"]

_COLLECTION = re.compile(
    r"^(?P<prefix>/apis?/.+?)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z0-9]+)$"
)
#: What a DELETE of an object that still has finalizers stamps on it.
_DELETION_TIMESTAMP = "2026-12-01T00:00:00Z"


@dataclass(frozen=True)
class _Event:
    version: int
    type: str
    path: str
    obj: dict[str, Any]
    #: A MODIFIED event's object as the previous event left it.
    old: dict[str, Any] | None = None


class Hold:
    """Requests ``method`` of ``path`` (``WATCH`` for a watch) left unanswered until
    :meth:`release`, as an API server that hangs: :attr:`entered` is set once one arrived."""

    def __init__(self, method: str, path: str) -> None:
        """Hold every ``method`` request of ``path``."""
        self.method = method
        self.path = path
        self.entered = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        """Answer the held requests (and every later one) as usual."""
        self._released.set()

    def wait(self, method: str, path: str) -> None:
        """Block a matching request until :meth:`release`."""
        if (method, path) == (self.method, self.path) and not self._released.is_set():
            self.entered.set()
            self._released.wait()


@dataclass(frozen=True)
class _Collection:
    prefix: str
    namespace: str | None
    plural: str
    labels: tuple[Requirement, ...]
    fields: tuple[Requirement, ...]

    def holds(self, path: str, obj: Mapping[str, Any]) -> bool:
        if not path.startswith(self.prefix + "/") or path.rsplit("/", 2)[-2] != self.plural:
            return False
        namespace = (obj.get("metadata") or {}).get("namespace")
        if self.namespace is not None and namespace != self.namespace:
            return False
        return matches(obj, labels=self.labels, fields=self.fields)


class MemoryApi:
    """Implements :class:`dra_kube_client.JsonTransport` over a dict of objects.

    - ``objects``: path -> stored object; ``documents``: path -> a fixed GET answer (discovery
      documents, ``/version``);
    - ``requests``: every ``(method, path)`` asked, watches as ``WATCH``;
    - ``fail``: ``(method, path) -> HTTP status`` answered once, instead of the request;
    - ``watch_wait_s``: how long a watch waits for events before it ends (0: it replays what
      happened and ends at once, for single-threaded tests);
    - :meth:`hold`: leave some requests unanswered (an API server that hangs).

    Subclasses may override :meth:`admit` to validate or change what is written.
    """

    def __init__(self, *, watch_wait_s: float = 0.0) -> None:
        """An empty server."""
        self.objects: dict[str, dict[str, Any]] = {}
        self.documents: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self.fail: dict[tuple[str, str], int] = {}
        self.watch_wait_s = watch_wait_s
        self.cond = threading.Condition(threading.RLock())
        self._events: list[_Event] = []
        # path -> the object as its last event recorded it (a MODIFIED event's ``old``)
        self._recorded: dict[str, dict[str, Any]] = {}
        self._version = 0
        self._serial = 0
        self._closed = False
        self._holds: list[Hold] = []

    # ---------------------------------------------------------------- test setup
    def put_object(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` at ``path`` (test setup), stamping uid and resourceVersion."""
        with self.cond:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            meta.setdefault("uid", f"uid-{self._next_serial()}")
            self._store(path, obj)
            return obj

    def kind_items(self, plural: str) -> list[dict[str, Any]]:
        """Every stored object of a resource (by its plural), in path order."""
        with self.cond:
            return [o for p, o in sorted(self.objects.items()) if p.rsplit("/", 2)[-2] == plural]

    def close(self) -> None:
        """End every open watch and answer the held requests (a server shutting down)."""
        with self.cond:
            self._closed = True
            self.cond.notify_all()
            holds = list(self._holds)
        for held in holds:
            held.release()

    def hold(self, method: str, path: str) -> Hold:
        """Leave every ``method`` request of ``path`` (``WATCH``: a watch of it) unanswered
        until the returned :class:`Hold` is released (or :meth:`close`)."""
        held = Hold(method, path)
        with self.cond:
            self._holds.append(held)
        return held

    def _wait_held(self, method: str, path: str) -> None:
        with self.cond:
            holds = list(self._holds)
        for held in holds:  # waited for outside the lock: other requests go on meanwhile
            held.wait(method, path)

    def admit(self, method: str, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as stored by a POST, PUT or PATCH of ``path`` (a hook: unchanged here).

        Raises:
            KubeApiError: to reject the write (e.g. 422 for an invalid object).
        """
        del method, path
        return obj

    # ---------------------------------------------------------------- transport
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
        """Answer as the API server would; errors are :class:`KubeApiError` with a reason."""
        del timeout_s
        self._wait_held(method, path)
        with self.cond:
            self.requests.append((method, path))
            status = self.fail.pop((method, path), None)
            if status is not None:
                raise KubeApiError(method, path, status, "injected", reason="Injected")
            return self._answer(method, path, query or {}, body, content_type)

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """Events of the collection at ``path``: after ``resourceVersion`` when one is given
        (else the current objects as ``ADDED``), then new ones for up to ``watch_wait_s``
        (and ``timeoutSeconds``)."""
        self._wait_held("WATCH", path)
        with self.cond:
            self.requests.append(("WATCH", path))
            status = self.fail.pop(("WATCH", path), None)
            if status is not None:
                raise KubeApiError("WATCH", path, status, "injected", reason="Injected")
            collection = self._collection("WATCH", path, query)
            version = query.get("resourceVersion") or "0"
            if version == "0":
                initial = [
                    {"type": "ADDED", "object": copy.deepcopy(o)}
                    for p, o in sorted(self.objects.items())
                    if collection.holds(p, o)
                ]
                cursor = len(self._events)
            else:
                if not version.isdigit():
                    raise KubeApiError(
                        "WATCH", path, 400, f"bad resourceVersion {version!r}", reason="BadRequest"
                    )
                initial = []
                cursor = next(
                    (i for i, e in enumerate(self._events) if e.version > int(version)),
                    len(self._events),
                )
        wait_s = min(self.watch_wait_s, float(query.get("timeoutSeconds") or timeout_s))
        return self._stream(collection, initial, cursor, time.monotonic() + wait_s)

    # ---------------------------------------------------------------- internals
    def _next_serial(self) -> int:
        self._serial += 1
        return self._serial

    def _store(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        self._version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        kind = "MODIFIED" if path in self.objects else "ADDED"
        self.objects[path] = obj
        self._record(kind, path, obj)
        return obj

    def _record(self, kind: str, path: str, obj: dict[str, Any]) -> None:
        recorded = copy.deepcopy(obj)
        old = self._recorded.get(path) if kind == "MODIFIED" else None
        if kind == "DELETED":
            self._recorded.pop(path, None)
        else:
            self._recorded[path] = recorded
        self._events.append(_Event(self._version, kind, path, recorded, old))
        self.cond.notify_all()

    def _remove(self, path: str) -> dict[str, Any]:
        obj = self.objects.pop(path)
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        self._record("DELETED", path, obj)
        return obj

    def _finish_delete(self, path: str) -> None:
        obj = self.objects.get(path)
        meta = (obj or {}).get("metadata") or {}
        if obj is not None and meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(path)

    def _collection(self, method: str, path: str, query: Mapping[str, str]) -> _Collection:
        match = _COLLECTION.match(path) if _is_collection(path) else None
        if match is None:
            raise KubeApiError(method, path, 404, "not found", reason="NotFound")
        try:
            labels = parse_selector(query.get("labelSelector", ""))
            fields = parse_selector(query.get("fieldSelector", ""))
        except SelectorError as exc:
            raise KubeApiError(method, path, 400, str(exc), reason="BadRequest") from exc
        return _Collection(match["prefix"], match["ns"], match["plural"], labels, fields)

    def _answer(
        self,
        method: str,
        path: str,
        query: Mapping[str, str],
        body: object,
        content_type: str,
    ) -> dict[str, Any]:
        status_sub = path.endswith("/status")
        target = path[: -len("/status")] if status_sub else path
        if method == "GET":
            if path in self.documents:
                return copy.deepcopy(self.documents[path])
            if target in self.objects:
                return copy.deepcopy(self.objects[target])
            collection = self._collection(method, path, query)
            items = [
                copy.deepcopy(o) for p, o in sorted(self.objects.items()) if collection.holds(p, o)
            ]
            return {"items": items, "metadata": {"resourceVersion": str(self._version)}}
        if method == "POST":
            obj = copy.deepcopy(_object_body(method, path, body))
            meta = obj.setdefault("metadata", {})
            if "generateName" in meta and "name" not in meta:
                meta["name"] = meta["generateName"] + str(self._next_serial())
            if "name" not in meta:
                raise KubeApiError(method, path, 422, "metadata.name: Required", reason="Invalid")
            namespace = self._collection(method, path, {}).namespace
            if namespace is not None:
                meta.setdefault("namespace", namespace)  # as the server defaults it
            child = f"{target}/{meta['name']}"
            if child in self.objects:
                raise KubeApiError(method, path, 409, "already exists", reason="AlreadyExists")
            meta.setdefault("uid", f"uid-{self._next_serial()}")
            return copy.deepcopy(self._store(child, self.admit(method, child, obj)))
        if target not in self.objects:
            raise KubeApiError(method, path, 404, "not found", reason="NotFound")
        current = self.objects[target]
        if method == "DELETE":
            if current["metadata"].get("finalizers"):
                current["metadata"]["deletionTimestamp"] = _DELETION_TIMESTAMP
                return copy.deepcopy(self._store(target, current))
            return copy.deepcopy(self._remove(target))
        if method == "PUT":
            new = copy.deepcopy(_object_body(method, path, body))
            rv = (new.get("metadata") or {}).get("resourceVersion")
            if rv is not None and rv != current["metadata"]["resourceVersion"]:
                raise KubeApiError(method, path, 409, "conflict", reason="Conflict")
            new.setdefault("metadata", {}).setdefault("uid", current["metadata"].get("uid"))
        elif method == "PATCH":
            new = copy.deepcopy(current)
            if content_type == "application/json-patch+json":
                if not isinstance(body, list):
                    raise KubeApiError(method, path, 400, "not a JSON patch", reason="BadRequest")
                for op in body:
                    _json_patch(new, op, method, path)
            else:
                _merge(new, _object_body(method, path, body))
        else:
            raise KubeApiError(method, path, 405, "method not allowed", reason="MethodNotAllowed")
        stored = copy.deepcopy(self._store(target, self.admit(method, target, new)))
        self._finish_delete(target)
        return stored

    def _stream(
        self, collection: _Collection, initial: list[dict[str, Any]], cursor: int, deadline: float
    ) -> Iterator[dict[str, Any]]:
        yield from initial
        while True:
            with self.cond:
                fresh = self._events[cursor:]
                cursor = len(self._events)
                if not fresh:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or self._closed:
                        return
                    self.cond.wait(remaining)
                    continue
            for event in fresh:
                seen = _as_seen(collection, event)
                if seen is not None:
                    yield seen


def _as_seen(collection: _Collection, event: _Event) -> dict[str, Any] | None:
    """The event as a watch of ``collection`` gets it, if at all: a change that moves an
    object into the selection is ``ADDED``, one that moves it out is ``DELETED`` with the
    object as it was, at the event's ``resourceVersion``."""
    now_in = collection.holds(event.path, event.obj)
    if event.type != "MODIFIED" or event.old is None:
        return {"type": event.type, "object": copy.deepcopy(event.obj)} if now_in else None
    was_in = collection.holds(event.path, event.old)
    if now_in:
        return {"type": "MODIFIED" if was_in else "ADDED", "object": copy.deepcopy(event.obj)}
    if not was_in:
        return None
    gone = copy.deepcopy(event.old)
    gone["metadata"]["resourceVersion"] = str(event.version)
    return {"type": "DELETED", "object": gone}


def _object_body(method: str, path: str, body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise KubeApiError(method, path, 400, "body is not a JSON object", reason="BadRequest")
    return body


def _is_collection(path: str) -> bool:
    """``/api/v1/<r>``, ``/apis/<g>/<v>/<r>``, optionally with ``namespaces/<ns>/`` before."""
    segments = path.strip("/").split("/")
    base = 2 if segments[0] == "api" else 3
    if len(segments) > base and segments[base] == "namespaces":
        return len(segments) == base + 3
    return len(segments) == base + 1


def _json_patch(obj: dict[str, Any], op: dict[str, Any], method: str, path: str) -> None:
    keys = [k.replace("~1", "/").replace("~0", "~") for k in op["path"].split("/")[1:]]
    parent: Any = obj
    for key in keys[:-1]:
        parent = parent.setdefault(key, {})
    last = keys[-1]
    if op["op"] == "test":
        if parent.get(last) != op["value"]:
            raise KubeApiError(method, path, 422, f"test failed at {op['path']}", reason="Invalid")
    elif op["op"] in ("add", "replace"):
        parent[last] = op["value"]
    elif op["op"] == "remove":
        if last not in parent:
            raise KubeApiError(method, path, 422, f"nothing at {op['path']}", reason="Invalid")
        del parent[last]
    else:
        raise KubeApiError(method, path, 400, f"unsupported op {op['op']!r}", reason="BadRequest")


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
