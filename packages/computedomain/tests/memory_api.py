"""An in-memory stand-in for the API server's JSON interface (unit tests only).

Objects are stored by path; resourceVersion is checked on PUT and by JSON-patch ``test``
ops, so optimistic-concurrency paths run as against a real server. Label selectors of the
form ``key`` (exists) are supported, which is all the components use.

ResourceClaimTemplates are immutable as on a real server, where the opaque parameters are
compared as the bytes they arrived in: a POST or PUT keeps the bytes the client sent (this
project's client: ``json.dumps`` with its default separators), a PATCH is applied to the
server's own compact encoding; an update whose parameter bytes differ is refused (422).
"""

from __future__ import annotations

import copy
import itertools
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from dra_kubelet_plugin.core.errors import KubeApiError

_COLLECTION = re.compile(
    r"^(?P<prefix>/apis?/.+?)(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[a-z]+)$"
)


class MemoryApi:
    """Implements ``JsonTransport`` over a dict of objects."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self.fail: dict[tuple[str, str], int] = {}
        self._rv = itertools.count(1)
        self._names = itertools.count(1)
        #: path of a ResourceClaimTemplate -> its opaque parameters as the bytes received
        self.wire: dict[str, list[str]] = {}

    # ---------------------------------------------------------------- helpers
    def put_object(
        self, path: str, obj: dict[str, Any], *, compact: bool = False
    ) -> dict[str, Any]:
        """Store ``obj`` at ``path`` (test setup), stamping uid and resourceVersion.

        ``compact``: as sent by a client that serializes compactly (a Go client).
        """
        obj = copy.deepcopy(obj)
        if _is_template(path):
            self.wire[path] = _parameter_bytes(obj, compact=compact)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", f"uid-{next(self._names)}")
        meta["resourceVersion"] = str(next(self._rv))
        self.objects[path] = obj
        return obj

    def kind_items(self, plural: str) -> list[dict[str, Any]]:
        """Every stored object of a resource."""
        return [o for p, o in sorted(self.objects.items()) if p.rsplit("/", 2)[-2] == plural]

    def _finish_delete(self, path: str) -> None:
        obj = self.objects.get(path)
        if (
            obj is not None
            and obj["metadata"].get("deletionTimestamp")
            and not obj["metadata"].get("finalizers")
        ):
            del self.objects[path]

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
        self.requests.append((method, path))
        status = self.fail.pop((method, path), None)
        if status is not None:
            raise KubeApiError(method, path, status, "injected")
        status_sub = path.endswith("/status")
        target = path[: -len("/status")] if status_sub else path
        if method == "GET":
            if target in self.objects:
                return copy.deepcopy(self.objects[target])
            match = _COLLECTION.match(target) if _is_collection(target) else None
            if match is None:
                raise KubeApiError(method, path, 404, "not found")
            return {"items": self._list(match, query or {})}
        if method == "POST":
            assert isinstance(body, dict)
            obj = copy.deepcopy(body)
            meta = obj.setdefault("metadata", {})
            if "generateName" in meta and "name" not in meta:
                meta["name"] = meta["generateName"] + str(next(self._names))
            child = f"{target}/{meta['name']}"
            if child in self.objects:
                raise KubeApiError(method, path, 409, "already exists")
            return copy.deepcopy(self.put_object(child, obj))
        if target not in self.objects:
            raise KubeApiError(method, path, 404, "not found")
        current = self.objects[target]
        if method == "DELETE":
            if current["metadata"].get("finalizers"):
                current["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
                current["metadata"]["resourceVersion"] = str(next(self._rv))
            else:
                del self.objects[target]
            return {}
        if method == "PUT":
            assert isinstance(body, dict)
            rv = body.get("metadata", {}).get("resourceVersion")
            if rv is not None and rv != current["metadata"]["resourceVersion"]:
                raise KubeApiError(method, path, 409, "conflict")
            new = copy.deepcopy(body)
            self._check_immutable(target, _parameter_bytes(new, compact=False), method, path)
            new["metadata"]["resourceVersion"] = str(next(self._rv))
            self.objects[target] = new
            self._finish_delete(target)
            return copy.deepcopy(new)
        if method == "PATCH":
            new = copy.deepcopy(current)
            if content_type == "application/json-patch+json":
                assert isinstance(body, list)
                for op in body:
                    self._json_patch(new, op, method, path)
            else:
                assert isinstance(body, dict)
                _merge(new, body)
            self._check_immutable(target, _parameter_bytes(new, compact=True), method, path)
            new["metadata"]["resourceVersion"] = str(next(self._rv))
            self.objects[target] = new
            self._finish_delete(target)
            return copy.deepcopy(new)
        raise KubeApiError(method, path, 405, "method not allowed")

    def _check_immutable(self, target: str, wire: list[str], method: str, path: str) -> None:
        if target in self.wire and self.wire[target] != wire:
            raise KubeApiError(method, path, 422, "spec: Invalid value: field is immutable")

    def _json_patch(self, obj: dict[str, Any], op: dict[str, Any], method: str, path: str) -> None:
        keys = [k.replace("~1", "/").replace("~0", "~") for k in op["path"].split("/")[1:]]
        parent: Any = obj
        for key in keys[:-1]:
            parent = parent.setdefault(key, {})
        last = keys[-1]
        if op["op"] == "test":
            if parent.get(last) != op["value"]:
                raise KubeApiError(method, path, 422, f"test failed at {op['path']}")
        elif op["op"] in ("add", "replace"):
            parent[last] = op["value"]
        elif op["op"] == "remove":
            if last not in parent:
                raise KubeApiError(method, path, 422, f"nothing at {op['path']}")
            del parent[last]

    def _list(self, match: re.Match[str], query: Mapping[str, str]) -> list[dict[str, Any]]:
        prefix, ns, plural = match["prefix"], match["ns"], match["plural"]
        selector = query.get("labelSelector")
        out = []
        for path, obj in sorted(self.objects.items()):
            if not path.startswith(prefix) or path.rsplit("/", 2)[-2] != plural:
                continue
            if ns is not None and obj["metadata"].get("namespace") != ns:
                continue
            if selector and selector not in (obj["metadata"].get("labels") or {}):
                continue
            out.append(copy.deepcopy(obj))
        return out

    def watch_lines(
        self, path: str, *, query: Mapping[str, str], timeout_s: float
    ) -> Iterator[dict[str, Any]]:
        """A watch that ends at once (no events), recorded like a request."""
        self.requests.append(("WATCH", path))
        return iter(())


def _is_template(path: str) -> bool:
    return "/resourceclaimtemplates/" in path


def _parameter_bytes(obj: Mapping[str, Any], *, compact: bool) -> list[str]:
    """The opaque parameters of a template's configs, serialized as a client would."""
    configs = ((obj.get("spec") or {}).get("spec") or {}).get("devices", {}).get("config") or []
    separators = (",", ":") if compact else (", ", ": ")
    return [
        json.dumps((c.get("opaque") or {}).get("parameters"), separators=separators)
        for c in configs
    ]


def _is_collection(path: str) -> bool:
    """``/api/v1/<r>``, ``/apis/<g>/<v>/<r>``, optionally with ``namespaces/<ns>/`` before."""
    segments = path.strip("/").split("/")
    base = 2 if segments[0] == "api" else 3
    if len(segments) > base and segments[base] == "namespaces":
        return len(segments) == base + 3
    return len(segments) == base + 1


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
