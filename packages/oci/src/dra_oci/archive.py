"""Writes container images as OCI archives without a registry, a daemon or root.

The one archive writer of the repository: the e2e harness's busybox images (``dra_e2e.images``)
and the driver and workload images (``images/build_image.py``) are both written here.

An archive written here is at the same time an OCI image layout (``oci-layout``, ``index.json``,
``blobs/sha256/...``) and a ``docker save`` archive (``manifest.json``), the combined form Docker
25+ writes itself. So one file loads everywhere users load images: ``ctr -n k8s.io images import``
(containerd, the kubelet's runtime), ``podman load``, ``docker load`` and ``kind load
image-archive``.

Everything is deterministic: fixed timestamps, root ownership, sorted entries, gzip without a
name or time. The same inputs give the same image digest.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = [
    "CREATED",
    "EPOCH",
    "MEDIA_CONFIG",
    "MEDIA_INDEX",
    "MEDIA_LAYER",
    "MEDIA_MANIFEST",
    "PATH_ENV",
    "ImageConfig",
    "LayerBuilder",
    "PlatformImage",
    "iter_layer_members",
    "read_names",
    "read_platforms",
    "write_archive",
    "write_index_archive",
]

# 2024-01-01T00:00:00Z: a fixed creation time keeps digests reproducible.
EPOCH = 1704067200
CREATED = "2024-01-01T00:00:00Z"

#: The usual search path, for images that set no other.
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"


class LayerBuilder:
    """Collects the entries of one filesystem layer and serializes them reproducibly.

    Paths are relative to the image root, without a leading slash. Parent directories are created
    implicitly (mode 0755). A later entry for a path already present is ignored, so the first
    package that ships a directory decides its mode, as dpkg does.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tarfile.TarInfo, bytes | None]] = {}

    def __contains__(self, path: str) -> bool:
        return _norm(path) in self._entries

    def file_data(self, path: str) -> bytes | None:
        """The content of a regular file in the layer; None for anything else."""
        entry = self._entries.get(_norm(path))
        return entry[1] if entry is not None else None

    def paths(self) -> list[str]:
        """All paths in the layer, sorted."""
        return sorted(self._entries)

    def _parents(self, path: str) -> None:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parent = "/".join(parts[:i])
            if parent not in self._entries:
                self._put(_info(parent, tarfile.DIRTYPE, mode=0o755), None)

    def _put(self, info: tarfile.TarInfo, data: bytes | None) -> None:
        if info.name in self._entries:
            return
        self._parents(info.name)
        self._entries[info.name] = (info, data)

    def add_dir(self, path: str, *, mode: int = 0o755) -> None:
        """A directory."""
        self._put(_info(_norm(path), tarfile.DIRTYPE, mode=mode), None)

    def add_file(self, path: str, data: bytes, *, mode: int = 0o644) -> None:
        """A regular file with the given content."""
        info = _info(_norm(path), tarfile.REGTYPE, mode=mode)
        info.size = len(data)
        self._put(info, data)

    def add_symlink(self, path: str, target: str) -> None:
        """A symbolic link (target kept verbatim, absolute or relative)."""
        info = _info(_norm(path), tarfile.SYMTYPE, mode=0o777)
        info.linkname = target
        self._put(info, None)

    def add_hardlink(self, path: str, target: str) -> None:
        """A hard link to a path already in the layer."""
        info = _info(_norm(path), tarfile.LNKTYPE, mode=0o644)
        info.linkname = _norm(target)
        self._put(info, None)

    def add_tree(self, root: Path, *, prefix: str) -> None:
        """Every file, directory and symlink under ``root``, placed under ``prefix``."""
        for path in sorted(root.rglob("*")):
            rel = f"{_norm(prefix)}/{path.relative_to(root).as_posix()}"
            if path.is_symlink():
                self.add_symlink(rel, str(path.readlink()))
            elif path.is_dir():
                self.add_dir(rel)
            elif path.is_file():
                mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                self.add_file(rel, path.read_bytes(), mode=mode)

    def tar_bytes(self) -> bytes:
        """The layer as an uncompressed tar, entries in path order (parents first)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(self._entries):
                info, data = self._entries[name]
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return buf.getvalue()


def _norm(path: str) -> str:
    path = path.strip("/")
    while path.startswith("./"):
        path = path[2:]
    if not path or ".." in path.split("/"):
        raise ValueError(f"invalid layer path {path!r}")
    return path


def _info(name: str, kind: bytes, *, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.mtime = EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


@dataclass(frozen=True)
class ImageConfig:
    """The runtime part of an image config (what ``docker inspect`` shows under Config)."""

    env: Sequence[str] = ()
    entrypoint: Sequence[str] = ()
    cmd: Sequence[str] = ()
    workdir: str = "/"
    user: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Blob:
    digest: str
    data: bytes


def _blob(data: bytes) -> _Blob:
    return _Blob("sha256:" + hashlib.sha256(data).hexdigest(), data)


@dataclass(frozen=True)
class PlatformImage:
    """One platform's image in a multi-platform archive (:func:`write_index_archive`).

    ``architecture`` is the OCI/Go name (``amd64``, ``arm64``); ``variant`` the CPU variant
    (``v8`` for arm64), empty for none.
    """

    architecture: str
    layers: Sequence[tuple[str, LayerBuilder]]
    config: ImageConfig
    variant: str = ""


@dataclass(frozen=True)
class _Image:
    """The blobs of one platform's image: layers, then config, then manifest."""

    blobs: list[_Blob]
    config: _Blob
    manifest: _Blob


def _image(image: PlatformImage) -> _Image:
    blobs: list[_Blob] = []
    diff_ids: list[str] = []
    layer_descs: list[dict[str, object]] = []
    for _comment, layer in image.layers:
        raw = layer.tar_bytes()
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        gz = _blob(gzip.compress(raw, compresslevel=6, mtime=0))
        blobs.append(gz)
        layer_descs.append({"mediaType": MEDIA_LAYER, "digest": gz.digest, "size": len(gz.data)})
    cfg: dict[str, object] = {
        "created": CREATED,
        "architecture": image.architecture,
        "os": "linux",
        "config": _runtime_config(image.config),
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created": CREATED, "created_by": comment} for comment, _ in image.layers],
    }
    if image.variant:
        cfg["variant"] = image.variant
    cfg_blob = _blob(_canonical(cfg))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {
            "mediaType": MEDIA_CONFIG,
            "digest": cfg_blob.digest,
            "size": len(cfg_blob.data),
        },
        "layers": layer_descs,
    }
    return _Image(blobs, cfg_blob, _blob(_canonical(manifest)))


def _named(media_type: str, blob: _Blob, names: Sequence[str]) -> list[dict[str, object]]:
    """``index.json`` entries: one per name, all pointing at ``blob``."""
    return [
        {
            "mediaType": media_type,
            "digest": blob.digest,
            "size": len(blob.data),
            "annotations": {
                "io.containerd.image.name": name,
                "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1],
            },
        }
        for name in names
    ]


def _docker_manifest(image: _Image, names: Sequence[str]) -> list[dict[str, object]]:
    return [
        {
            "Config": _blob_path(image.config.digest),
            # Fully qualified: podman would otherwise put short names under localhost/.
            "RepoTags": list(names),
            "Layers": [_blob_path(b.digest) for b in image.blobs],
        }
    ]


def write_archive(
    out: Path,
    *,
    names: Sequence[str],
    layers: Sequence[tuple[str, LayerBuilder]],
    config: ImageConfig,
    architecture: str = "amd64",
) -> str:
    """Writes an image with the given layers (each with a history comment) to ``out``.

    ``names`` are full references (``docker.io/library/name:tag``); the first is the primary
    one. Returns the manifest digest, which is what containerd reports as the image's digest.
    """
    if not names:
        raise ValueError("an image needs at least one name")
    image = _image(PlatformImage(architecture, layers, config))
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": _named(MEDIA_MANIFEST, image.manifest, names),
    }
    _write(out, [*image.blobs, image.config, image.manifest], index, _docker_manifest(image, names))
    return image.manifest.digest


def write_index_archive(out: Path, *, names: Sequence[str], images: Sequence[PlatformImage]) -> str:
    """Writes one image for several platforms: an OCI image index over one manifest each.

    ``index.json`` names the image index, which lists each platform's manifest, so containerd,
    podman and Docker's containerd store pick the platform they run on. ``manifest.json`` (the
    ``docker save`` form, which has no platforms) holds the first image only: Docker's classic
    store loads that one. Returns the image index's digest (what a registry would report).
    """
    if not names:
        raise ValueError("an image needs at least one name")
    if not images:
        raise ValueError("an image index needs at least one platform")
    platforms = [(i.architecture, i.variant) for i in images]
    if len(set(platforms)) != len(platforms):
        raise ValueError(f"platforms repeat: {platforms}")
    built = [_image(i) for i in images]
    entries: list[dict[str, object]] = []
    for spec, image in zip(images, built, strict=True):
        platform = {"architecture": spec.architecture, "os": "linux"}
        if spec.variant:
            platform["variant"] = spec.variant
        entries.append(
            {
                "mediaType": MEDIA_MANIFEST,
                "digest": image.manifest.digest,
                "size": len(image.manifest.data),
                "platform": platform,
            }
        )
    image_index = _blob(
        _canonical({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": entries})
    )
    blobs: dict[str, _Blob] = {}
    for image in built:
        for blob in (*image.blobs, image.config, image.manifest):
            blobs.setdefault(blob.digest, blob)
    blobs[image_index.digest] = image_index
    layout = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": _named(MEDIA_INDEX, image_index, names),
    }
    _write(out, list(blobs.values()), layout, _docker_manifest(built[0], names))
    return image_index.digest


def _write(out: Path, blobs: Sequence[_Blob], index: object, docker_manifest: object) -> None:
    """The archive, written beside ``out`` and renamed, so a failed write leaves nothing."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, "oci-layout", _canonical({"imageLayoutVersion": "1.0.0"}))
        _add(tar, "blobs", None)
        _add(tar, "blobs/sha256", None)
        for blob in blobs:
            _add(tar, _blob_path(blob.digest), blob.data)
        _add(tar, "index.json", _canonical(index))
        _add(tar, "manifest.json", _canonical(docker_manifest))
    tmp.replace(out)


def _runtime_config(config: ImageConfig) -> dict[str, object]:
    out: dict[str, object] = {"Env": list(config.env), "WorkingDir": config.workdir}
    if config.entrypoint:
        out["Entrypoint"] = list(config.entrypoint)
    if config.cmd:
        out["Cmd"] = list(config.cmd)
    if config.user:
        out["User"] = config.user
    if config.labels:
        out["Labels"] = dict(sorted(config.labels.items()))
    return out


def _blob_path(digest: str) -> str:
    return "blobs/sha256/" + digest.split(":", 1)[1]


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _add(tar: tarfile.TarFile, name: str, data: bytes | None) -> None:
    info = _info(name, tarfile.DIRTYPE if data is None else tarfile.REGTYPE, mode=0o755)
    if data is not None:
        info.mode = 0o644
        info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def read_names(archive: Path) -> list[str]:
    """The image references an archive written by :func:`write_archive` carries."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise ValueError(f"{archive}: index.json is not a file")
        index = json.load(member)
    return [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]]


def iter_layer_members(
    archive: Path, *, architecture: str | None = None
) -> Iterable[tarfile.TarInfo]:
    """Every entry of every layer of the archive's first image, lowest layer first.

    ``architecture`` picks that platform's image of a multi-platform archive (through
    ``index.json``); None reads the image ``manifest.json`` names (the first platform's).
    """
    with tarfile.open(archive) as tar:
        if architecture is None:
            layer_paths = json.load(_must(tar, "manifest.json"))[0]["Layers"]
        else:
            manifest = _platform_manifest(tar, archive, architecture)
            layer_paths = [_blob_path(layer["digest"]) for layer in manifest["layers"]]
        for layer_path in layer_paths:
            data = gzip.decompress(_must(tar, layer_path).read())
            with tarfile.open(fileobj=io.BytesIO(data)) as layer:
                yield from layer.getmembers()


def read_platforms(archive: Path) -> list[str]:
    """The platforms (``linux/amd64``, ``linux/arm64/v8``) of the archive's first image."""
    with tarfile.open(archive) as tar:
        desc = json.load(_must(tar, "index.json"))["manifests"][0]
        doc = json.load(_must(tar, _blob_path(desc["digest"])))
        if doc.get("mediaType") != MEDIA_INDEX:
            config = json.load(_must(tar, _blob_path(doc["config"]["digest"])))
            platforms = [config]
        else:
            platforms = [m["platform"] for m in doc["manifests"]]
    return [
        "/".join(p for p in (pl["os"], pl["architecture"], pl.get("variant", "")) if p)
        for pl in platforms
    ]


def _platform_manifest(tar: tarfile.TarFile, archive: Path, architecture: str) -> Any:
    desc = json.load(_must(tar, "index.json"))["manifests"][0]
    doc = json.load(_must(tar, _blob_path(desc["digest"])))
    if doc.get("mediaType") == MEDIA_INDEX:
        for entry in doc["manifests"]:
            if entry.get("platform", {}).get("architecture") == architecture:
                return json.load(_must(tar, _blob_path(entry["digest"])))
    elif json.load(_must(tar, _blob_path(doc["config"]["digest"])))["architecture"] == architecture:
        return doc
    raise ValueError(f"{archive}: no image for architecture {architecture}")


def _must(tar: tarfile.TarFile, name: str) -> IO[bytes]:
    member = tar.extractfile(name)
    if member is None:
        raise ValueError(f"{name} is missing from the archive")
    return member
