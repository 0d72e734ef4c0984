"""Device metadata for workloads (KEP-5304, gate ``DeviceMetadata``): one JSON file per
claim request, bind-mounted into the containers that use the request.

The kubelet's DRA gRPC API (``dra-v1.proto``) has no metadata field: in KEP-5304 the kubelet
plugin framework writes the file and mounts it with CDI, and this plugin is its own framework.
Paths and schema are the KEP's:

- host: ``<plugins dir>/gpu.nvidia.com/dra-device-metadata/<claimUID>/<request>/metadata.json``
  (keyed by UID: a claim deleted and recreated under the same name while the old one is
  still unprepared keeps its own files; releases before this one used ``<claimNs>_<claimName>``,
  which :meth:`MetadataFiles.legacy_key` names so those directories are cleaned up too)
- container: ``/var/run/dra-device-attributes/<claimName>/<request>/gpu.nvidia.com-metadata.json``
- document: ``apiVersion: metadata.resource.k8s.io/v1alpha1``, ``kind: DeviceMetadata``, the
  claim's name/namespace/uid, ``requests[].devices[]`` with name, driver, pool and
  attributes in ``resource.k8s.io`` ``DeviceAttribute`` form.

The mount rides on the device's own CDI edits in the claim's spec, so no extra CDI device ID
is needed. :func:`render_metadata` is pure; :class:`MetadataFiles` does the file I/O.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from dra_kubelet_core.cdi import Mount

__all__ = [
    "CONTAINER_DIR",
    "METADATA_API_VERSION",
    "MetadataDevice",
    "MetadataFiles",
    "container_path",
    "render_metadata",
]

METADATA_API_VERSION = "metadata.resource.k8s.io/v1alpha1"
CONTAINER_DIR = "/var/run/dra-device-attributes"


@dataclass(frozen=True)
class MetadataDevice:
    """One prepared device of a request, with its attributes (``{"string": ...}`` form)."""

    name: str
    pool: str
    attributes: Mapping[str, object]


def render_metadata(
    *,
    driver: str,
    claim_namespace: str,
    claim_name: str,
    claim_uid: str,
    request: str,
    devices: Sequence[MetadataDevice],
) -> dict[str, object]:
    """The ``DeviceMetadata`` document of one request."""
    return {
        "apiVersion": METADATA_API_VERSION,
        "kind": "DeviceMetadata",
        "metadata": {"name": claim_name, "namespace": claim_namespace, "uid": claim_uid},
        "requests": [
            {
                "name": request,
                "devices": [
                    {
                        "name": d.name,
                        "driver": driver,
                        "pool": d.pool,
                        "attributes": dict(sorted(d.attributes.items())),
                    }
                    for d in devices
                ],
            }
        ],
    }


def container_path(*, driver: str, claim_name: str, request: str) -> str:
    """Where a container reads the request's metadata."""
    return f"{CONTAINER_DIR}/{claim_name}/{request}/{driver}-metadata.json"


class MetadataFiles:
    """The metadata files below ``<plugin dir>/dra-device-metadata``, one directory per claim
    UID."""

    def __init__(self, plugin_dir: Path, *, driver: str) -> None:
        """Keep files below ``plugin_dir`` (the same path on the host: the runtime mounts it)."""
        self.root = plugin_dir / "dra-device-metadata"
        self._driver = driver

    @staticmethod
    def legacy_key(namespace: str, name: str) -> str:
        """The per-claim directory name of earlier releases, ``<namespace>_<name>``."""
        return f"{namespace}_{name}"

    def _claim_dir(self, claim_uid: str) -> Path:
        if not claim_uid or "/" in claim_uid or claim_uid in (".", ".."):
            raise ValueError(f"claim UID {claim_uid!r}: not usable as a directory name")
        return self.root / claim_uid

    def write(
        self, *, claim_uid: str, claim_name: str, request: str, doc: Mapping[str, object]
    ) -> Mount:
        """Write one request's document atomically and return its read-only bind mount.

        Raises:
            ValueError: ``claim_uid`` cannot name a directory (a ``/``, or empty).
        """
        directory = self._claim_dir(claim_uid) / request
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / "metadata.json"
        tmp = directory / ".metadata.json.tmp"
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        tmp.chmod(0o644)
        os.replace(tmp, target)
        return Mount(
            host_path=str(target),
            container_path=container_path(
                driver=self._driver, claim_name=claim_name, request=request
            ),
            options=("ro", "nosuid", "nodev", "bind"),
        )

    def release(self, claim_uid: str) -> None:
        """Remove the claim's files (idempotent)."""
        self.remove(claim_uid)

    def known_claims(self) -> set[str]:
        """Every claim directory (UIDs, and ``<namespace>_<name>`` of earlier releases)."""
        try:
            return {p.name for p in self.root.iterdir() if p.is_dir()}
        except FileNotFoundError:
            return set()

    def remove(self, key: str) -> None:
        """Remove the claim directory ``key`` (a leftover; idempotent)."""
        if not key or "/" in key or key in (".", ".."):
            return
        shutil.rmtree(self.root / key, ignore_errors=True)
