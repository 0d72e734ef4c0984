"""Aliases of imported images (dra_e2e.image_aliases): read from the archive's image config."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from pathlib import Path

import dra_oci
import pytest
from dra_e2e import images
from dra_e2e.errors import ImageError
from dra_e2e.image_aliases import ALIASES_LABEL, archive_aliases


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _blob(tar: tarfile.TarFile, doc: object) -> str:
    data = json.dumps(doc).encode()
    digest = hashlib.sha256(data).hexdigest()
    _add(tar, f"blobs/sha256/{digest}", data)
    return f"sha256:{digest}"


def _archive(path: Path, names: list[str], labels: dict[str, str]) -> Path:
    """An OCI layout with one image (no layers) under ``names`` whose config has ``labels``."""
    with tarfile.open(path, "w") as tar:
        config = _blob(tar, {"architecture": "amd64", "os": "linux", "config": {"Labels": labels}})
        manifest = _blob(
            tar,
            {
                "schemaVersion": 2,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": config},
                "layers": [],
            },
        )  # fmt: skip
        index = {
            "schemaVersion": 2,
            "manifests": [
                {"digest": manifest, "annotations": {"io.containerd.image.name": n}} for n in names
            ],
        }
        _add(tar, "index.json", json.dumps(index).encode())
    return path


def test_label_names_the_aliases_of_the_first_name(tmp_path: Path) -> None:
    archive = _archive(
        tmp_path / "a.tar",
        ["docker.io/example/standin:1", "docker.io/example/standin:one"],
        {ALIASES_LABEL: "docker.io/library/ubuntu:22.04, docker.io/nvidia/cuda:12", "x": "y"},
    )
    assert archive_aliases(archive) == [
        ("docker.io/example/standin:1", "docker.io/library/ubuntu:22.04"),
        ("docker.io/example/standin:1", "docker.io/nvidia/cuda:12"),
    ]


def test_images_without_the_label_have_no_aliases(tmp_path: Path) -> None:
    plain = _archive(tmp_path / "plain.tar", ["docker.io/example/plain:1"], {"x": "y"})
    assert archive_aliases(plain) == []
    busybox = images.write_oci_archive(
        tmp_path / "busybox.tar", images.ImageSpec(reference="docker.io/dra-e2e/unit:1.0")
    )
    assert archive_aliases(busybox) == []


def test_a_docker_save_archive_without_an_index_has_no_aliases(tmp_path: Path) -> None:
    path = tmp_path / "docker.tar"
    with tarfile.open(path, "w") as tar:
        _add(tar, "manifest.json", b"[]")
    assert archive_aliases(path) == []


def test_a_broken_archive_is_an_image_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "broken.tar"
    with tarfile.open(path, "w") as tar:
        _add(tar, "index.json", json.dumps({"manifests": [
            {"digest": "sha256:" + "0" * 64,
             "annotations": {"io.containerd.image.name": "docker.io/x/y:1"}},
        ]}).encode())  # fmt: skip
    with pytest.raises(ImageError, match=re.escape(str(path))):
        archive_aliases(path)


def test_a_multi_platform_archive_reads_the_labels_of_its_first_platform(tmp_path: Path) -> None:
    layer = dra_oci.LayerBuilder()
    layer.add_file("etc/motd", b"hi\n")
    config = dra_oci.ImageConfig(labels={ALIASES_LABEL: "docker.io/library/ubuntu:22.04"})
    archive = tmp_path / "multi.tar"
    dra_oci.write_index_archive(
        archive,
        names=["docker.io/example/standin:1"],
        images=[
            dra_oci.PlatformImage("amd64", [("motd", layer)], config),
            dra_oci.PlatformImage("arm64", [("motd", layer)], config, "v8"),
        ],
    )
    assert archive_aliases(archive) == [
        ("docker.io/example/standin:1", "docker.io/library/ubuntu:22.04")
    ]
