"""Where ResourceClaims come from: the API server, or a directory standing in for it.

:class:`KubeClaimSource` GETs claims through :class:`KubeTransport` in the
``resource.k8s.io`` version the server serves (:mod:`.resource_api`), converts them to v1 and
parses them with :mod:`dra_api_types`. :class:`DirectoryClaimSource` is a test double of
that endpoint: it serves claims from JSON/YAML files, so the plugin's prepare path can be
exercised without a cluster (selected with ``--claims-directory``; never in production).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Protocol

from dra_api_types import ResourceClaim, ValidationError
from dra_kube_client import JsonTransport, KubeApiError, path_segment

from dra_kubelet_core.resource_api import ResourceApi

__all__ = ["ClaimParseError", "ClaimSource", "DirectoryClaimSource", "KubeClaimSource"]


class ClaimParseError(ValueError):
    """A claim object could not be decoded; the message names the object and field."""


class ClaimSource(Protocol):
    """Reads ResourceClaims by namespace and name."""

    async def get(self, namespace: str, name: str) -> ResourceClaim | None:
        """Return the claim, or ``None`` when it does not exist.

        Raises:
            KubeApiError: the source could not answer.
            ClaimParseError: the stored object is not a ResourceClaim.
        """
        ...


def _parse(data: Any, where: str) -> ResourceClaim:
    if not isinstance(data, dict):
        raise ClaimParseError(f"{where}: not a JSON object")
    try:
        return ResourceClaim.from_dict(data)
    except ValidationError as exc:
        raise ClaimParseError(f"{where}: {exc}") from exc


class KubeClaimSource:
    """Claims from the API server (``GET .../resourceclaims/NAME``)."""

    def __init__(self, transport: JsonTransport, api: ResourceApi | None = None) -> None:
        """Use ``transport`` for requests, in the version of ``api`` (default v1)."""
        self._transport = transport
        self._api = api or ResourceApi()

    async def get(self, namespace: str, name: str) -> ResourceClaim | None:
        """GET the claim; 404 is ``None``."""
        path = (
            f"/apis/resource.k8s.io/{self._api.version}/namespaces/{path_segment(namespace)}"
            f"/resourceclaims/{path_segment(name)}"
        )
        try:
            data = await asyncio.to_thread(self._transport.request, "GET", path)
        except KubeApiError as exc:
            if exc.status == 404:
                return None
            raise
        where = f"ResourceClaim {namespace}/{name}"
        if not isinstance(data, dict):
            raise ClaimParseError(f"{where}: not a JSON object")
        try:
            data = self._api.to_v1(data, "ResourceClaim")
        except ValidationError as exc:
            raise ClaimParseError(f"{where}: {exc}") from exc
        return _parse(data, where)


class DirectoryClaimSource:
    """Test double of the API server's claim endpoint: ``<root>/<namespace>/<name>.json``.

    A ``.yaml`` file is read when no ``.json`` exists. A missing file is a missing claim.
    Files are re-read on every call, so a test changes the "cluster" by writing files.
    """

    def __init__(self, root: Path) -> None:
        """Serve claims below ``root``."""
        self.root = root

    def path_for(self, namespace: str, name: str) -> Path:
        """Where the claim ``namespace/name`` is stored."""
        return self.root / namespace / f"{name}.json"

    def put(self, claim: ResourceClaim) -> Path:
        """Store ``claim`` (atomically), as a test sets up the "cluster"."""
        meta = claim.metadata
        path = self.path_for(meta.namespace or "", meta.name or "")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(claim.to_dict()))
        tmp.replace(path)
        return path

    def delete(self, namespace: str, name: str) -> None:
        """Remove a claim."""
        self.path_for(namespace, name).unlink(missing_ok=True)

    async def get(self, namespace: str, name: str) -> ResourceClaim | None:
        """Read the claim's file; ``None`` when absent."""
        path = self.path_for(namespace, name)
        where = f"ResourceClaim {namespace}/{name} ({path})"
        try:
            text = path.read_text()
            data: Any = json.loads(text)
        except FileNotFoundError:
            import yaml  # deferred import: the plugin in its pod reads no YAML (docs/scale.md)

            try:
                data = yaml.safe_load(path.with_suffix(".yaml").read_text())
            except FileNotFoundError:
                return None
        except ValueError as exc:
            raise ClaimParseError(f"{where}: {exc}") from exc
        return _parse(data, where)
