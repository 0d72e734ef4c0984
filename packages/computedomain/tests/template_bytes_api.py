"""The shared in-memory API, with ResourceClaimTemplates immutable as on a real server.

The real API server compares a template's opaque parameters as the bytes they arrived in: a
POST or PUT keeps the bytes the client sent (this project's client: ``json.dumps`` with its
default separators), a PATCH is applied to the server's own compact encoding; an update whose
parameter bytes differ is refused (422). The finalizer handling of the controller depends on
exactly this, so its tests run against this model.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from dra_kube_client import KubeApiError
from dra_kube_client.testing import MemoryApi


class TemplateBytesApi(MemoryApi):
    """:class:`MemoryApi` that refuses template updates changing the parameters' bytes."""

    def __init__(self) -> None:
        """An empty server."""
        super().__init__()
        #: path of a ResourceClaimTemplate -> its opaque parameters as the bytes received
        self.wire: dict[str, list[str]] = {}

    def put_object(
        self, path: str, obj: dict[str, Any], *, compact: bool = False
    ) -> dict[str, Any]:
        """Store ``obj`` at ``path`` (test setup).

        ``compact``: as sent by a client that serializes compactly (a Go client).
        """
        if _is_template(path):
            self.wire[path] = _parameter_bytes(obj, compact=compact)
        return super().put_object(path, obj)

    def admit(self, method: str, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Record a new template's bytes; refuse an update that changes them."""
        if not _is_template(path):
            return obj
        wire = _parameter_bytes(obj, compact=method == "PATCH")
        if method == "POST":
            self.wire[path] = wire
        elif path in self.wire and self.wire[path] != wire:
            raise KubeApiError(
                method, path, 422, "spec: Invalid value: field is immutable", reason="Invalid"
            )
        return copy.deepcopy(obj)


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
