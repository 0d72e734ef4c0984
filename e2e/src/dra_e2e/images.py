"""Container images without a registry: OCI archives built locally and imported.

``build_busybox_image`` packs Debian's static busybox into a one-layer OCI image
archive (what ``docker save``/``skopeo`` would produce), so the pause image and a
test image exist without any registry. ``import_image`` loads any OCI or Docker
archive into a node's containerd ``k8s.io`` namespace, where the kubelet finds it;
pods must then use ``imagePullPolicy: IfNotPresent`` (or ``Never``) and a tag
other than ``latest``.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_e2e.errors import ImageError, ToolMissingError

BUSYBOX = Path("/bin/busybox")
_MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
_MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"

# The sandbox ("pause") container only has to exist and exit on SIGTERM/SIGINT.
PAUSE_COMMAND = ("/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done")


@dataclass(frozen=True)
class ImageSpec:
    """What goes into a locally built image besides busybox itself."""

    reference: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ("/bin/sh",)
    extra_files: tuple[tuple[str, bytes, int], ...] = ()


def _tar_add(tar: tarfile.TarFile, name: str, *, data: bytes | None = None, mode: int = 0o755,
             kind: bytes = tarfile.REGTYPE, link: str = "") -> None:  # fmt: skip
    info = tarfile.TarInfo(name)
    info.mode = mode
    info.type = kind
    info.mtime = 0
    if kind == tarfile.SYMTYPE:
        info.linkname = link
        tar.addfile(info)
    elif kind == tarfile.DIRTYPE:
        tar.addfile(info)
    else:
        payload = data or b""
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))


def _busybox_applets() -> list[str]:
    if not BUSYBOX.is_file():
        raise ToolMissingError("busybox", "install the Debian package busybox-static")
    out = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True)
    return sorted({a for a in out.stdout.split() if a and "/" not in a and a != "busybox"})


def busybox_layer(extra_files: Sequence[tuple[str, bytes, int]] = ()) -> bytes:
    """An uncompressed layer tar: /bin/busybox, its applet symlinks, /etc basics."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for directory in ("bin", "etc", "tmp", "root", "var", "usr", "proc", "sys", "dev"):
            _tar_add(
                tar, directory, kind=tarfile.DIRTYPE, mode=0o1777 if directory == "tmp" else 0o755
            )
        _tar_add(tar, "bin/busybox", data=BUSYBOX.read_bytes())
        for applet in _busybox_applets():
            _tar_add(tar, f"bin/{applet}", kind=tarfile.SYMTYPE, link="busybox")
        _tar_add(
            tar,
            "etc/passwd",
            data=b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
            mode=0o644,
        )
        _tar_add(tar, "etc/group", data=b"root:x:0:\nnogroup:x:65534:\n", mode=0o644)
        for path, data, mode in extra_files:
            _tar_add(tar, path.lstrip("/"), data=data, mode=mode)
    return buf.getvalue()  # fmt: skip


def _blob(out: tarfile.TarFile, data: bytes) -> str:
    digest = hashlib.sha256(data).hexdigest()
    _tar_add(out, f"blobs/sha256/{digest}", data=data, mode=0o644)
    return f"sha256:{digest}"


def _descriptor(media_type: str, data: bytes, digest: str, **extra: Any) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": digest, "size": len(data), **extra}


def write_oci_archive(path: Path, spec: ImageSpec, *, layer: bytes | None = None) -> Path:
    """Write an OCI image-layout tar of ``spec`` to ``path`` (single amd64 manifest)."""
    layer = layer if layer is not None else busybox_layer(spec.extra_files)
    layer_digest = "sha256:" + hashlib.sha256(layer).hexdigest()
    config: dict[str, Any] = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": list(spec.cmd),
            "WorkingDir": "/",
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "dra-e2e images.write_oci_archive"}],
    }
    if spec.entrypoint:
        config["config"]["Entrypoint"] = list(spec.entrypoint)
    config_bytes = json.dumps(config, sort_keys=True).encode()
    tag = spec.reference.rsplit(":", 1)[1] if ":" in spec.reference.rsplit("/", 1)[-1] else "latest"
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, mode="w", format=tarfile.PAX_FORMAT) as out:
        _tar_add(out, "blobs", kind=tarfile.DIRTYPE)
        _tar_add(out, "blobs/sha256", kind=tarfile.DIRTYPE)
        layer_d = _blob(out, layer)
        config_d = _blob(out, config_bytes)
        manifest = {
            "schemaVersion": 2,
            "mediaType": _MEDIA_MANIFEST,
            "config": _descriptor(_MEDIA_CONFIG, config_bytes, config_d),
            "layers": [_descriptor(_MEDIA_LAYER, layer, layer_d)],
        }
        manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
        manifest_d = _blob(out, manifest_bytes)
        index = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                _descriptor(
                    _MEDIA_MANIFEST,
                    manifest_bytes,
                    manifest_d,
                    platform={"architecture": "amd64", "os": "linux"},
                    annotations={
                        "io.containerd.image.name": spec.reference,
                        "org.opencontainers.image.ref.name": tag,
                    },
                )
            ],
        }
        _tar_add(out, "oci-layout", data=b'{"imageLayoutVersion":"1.0.0"}', mode=0o644)
        _tar_add(out, "index.json", data=json.dumps(index).encode(), mode=0o644)
    return path


def import_image(archive: Path, *, ctr: Path, containerd_socket: Path) -> list[str]:
    """Import an OCI/Docker image archive into containerd's ``k8s.io`` namespace.

    Returns the image references containerd reports for the archive.
    """
    if not archive.is_file():
        raise ImageError(str(archive), "archive does not exist")
    proc = subprocess.run(
        [str(ctr), "--address", str(containerd_socket), "--namespace", "k8s.io",
         "images", "import", "--local", "--no-unpack=false", str(archive)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ImageError(str(archive), f"ctr images import failed: {proc.stderr.strip()}")
    refs = []
    for line in proc.stdout.splitlines():
        # ctr prints "unpacking <ref> (sha256:...)...done" per image.
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "unpacking":
            refs.append(parts[1])
    return refs


def list_images(*, ctr: Path, containerd_socket: Path) -> list[str]:
    """References of the images in a node's ``k8s.io`` namespace."""
    proc = subprocess.run(
        [str(ctr), "--address", str(containerd_socket), "--namespace", "k8s.io",
         "images", "list", "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ImageError("*", f"ctr images list failed: {proc.stderr.strip()}")
    return [line for line in proc.stdout.splitlines() if line]
