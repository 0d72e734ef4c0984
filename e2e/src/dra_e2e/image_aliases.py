"""Aliases of an imported image inside the harness's own containerd, and nowhere else.

A stand-in image (``images/build_image.py workload``) carries this project's names, so that its
archive, loaded into a user's Docker or a kind node, never shadows the real images it stands in
for. Manifests written for those real images (the seed article's ``ubuntu:22.04``, NVIDIA's
``nvidia/cuda``) still run verbatim on the harness cluster: the image config lists the real
names in the label :data:`ALIASES_LABEL`, and the harness tags the imported image under them in
its nodes' containerd.
"""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from dra_e2e.errors import ImageError

__all__ = ["ALIASES_LABEL", "archive_aliases", "tag_aliases"]

#: Comma-separated image references; images/build_image.py writes the same key.
ALIASES_LABEL = "io.dra-e2e.image.aliases"


def _json_member(tar: tarfile.TarFile, name: str) -> Any:
    try:
        member = tar.extractfile(name)
    except KeyError:
        return None
    return None if member is None else json.loads(member.read())


def archive_aliases(archive: Path) -> list[tuple[str, str]]:
    """``(imported name, alias)`` pairs the archive's images ask for; empty without the label
    or without an OCI ``index.json`` (a plain ``docker save`` archive)."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    try:
        with tarfile.open(archive) as tar:
            index = _json_member(tar, "index.json")
            if not isinstance(index, dict):
                return []
            for desc in index.get("manifests", []):
                name = desc.get("annotations", {}).get("io.containerd.image.name")
                # Every name of one manifest shares its config: its first name is the source.
                if not name or desc["digest"] in seen:
                    continue
                seen.add(desc["digest"])
                manifest = _json_member(tar, _blob_path(desc["digest"]))
                if "manifests" in manifest:
                    # A multi-platform image: every platform carries the same labels.
                    manifest = _json_member(tar, _blob_path(manifest["manifests"][0]["digest"]))
                config = _json_member(tar, _blob_path(manifest["config"]["digest"]))
                labels = (config.get("config") or {}).get("Labels") or {}
                for alias in str(labels.get(ALIASES_LABEL, "")).split(","):
                    if alias.strip():
                        pairs.append((name, alias.strip()))
    except (OSError, tarfile.TarError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ImageError(str(archive), f"cannot read the image config: {exc}") from exc
    return pairs


def _blob_path(digest: str) -> str:
    algorithm, _, hexdigest = digest.partition(":")
    return f"blobs/{algorithm}/{hexdigest}"


def tag_aliases(archive: Path, *, ctr: Path, containerd_socket: Path) -> list[str]:
    """Tags the archive's imported image under its aliases in containerd's ``k8s.io``
    namespace; returns the aliases."""
    done: list[str] = []
    for source, alias in archive_aliases(archive):
        proc = subprocess.run(
            [str(ctr), "--address", str(containerd_socket), "--namespace", "k8s.io",
             "images", "tag", "--force", source, alias],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise ImageError(str(archive), f"ctr images tag {alias} failed: {proc.stderr.strip()}")
        done.append(alias)
    return done
