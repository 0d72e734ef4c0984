"""Multi-platform archives: an OCI image index over one manifest per platform."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

import pytest
from dra_oci import (
    MEDIA_INDEX,
    MEDIA_MANIFEST,
    ImageConfig,
    LayerBuilder,
    PlatformImage,
    iter_layer_members,
    read_names,
    read_platforms,
    write_archive,
    write_index_archive,
)

NAMES = ["docker.io/example/multi:1.0"]


def _image(architecture: str, variant: str = "") -> PlatformImage:
    shared = LayerBuilder()
    shared.add_file("etc/motd", b"same on every platform\n")
    native = LayerBuilder()
    native.add_file("usr/bin/tool", f"binary for {architecture}\n".encode(), mode=0o755)
    return PlatformImage(
        architecture,
        [("shared", shared), (f"{architecture} binaries", native)],
        ImageConfig(cmd=["/usr/bin/tool"]),
        variant,
    )


def _json(tar: tarfile.TarFile, name: str) -> dict[str, object]:
    member = tar.extractfile(name)
    assert member is not None
    loaded: dict[str, object] = json.loads(member.read())
    return loaded


def _blob(tar: tarfile.TarFile, digest: str) -> dict[str, object]:
    return _json(tar, "blobs/sha256/" + digest.split(":", 1)[1])


def test_index_lists_each_platform_manifest_and_config(tmp_path: Path) -> None:
    archive = tmp_path / "multi.tar"
    digest = write_index_archive(
        archive, names=NAMES, images=[_image("amd64"), _image("arm64", "v8")]
    )
    with tarfile.open(archive) as tar:
        members = {m.name for m in tar.getmembers() if m.isfile()}
        for name in members:
            if name.startswith("blobs/sha256/"):
                data = tar.extractfile(name)
                assert data is not None
                assert hashlib.sha256(data.read()).hexdigest() == name.rsplit("/", 1)[1]
        layout = _json(tar, "index.json")
        assert layout["manifests"] == [
            {
                "mediaType": MEDIA_INDEX,
                "digest": digest,
                "size": tar.getmember("blobs/sha256/" + digest[7:]).size,
                "annotations": {
                    "io.containerd.image.name": NAMES[0],
                    "org.opencontainers.image.ref.name": "1.0",
                },
            }
        ]
        index = _blob(tar, digest)
        assert index["mediaType"] == MEDIA_INDEX
        entries = index["manifests"]
        assert isinstance(entries, list)
        assert [e["platform"] for e in entries] == [
            {"architecture": "amd64", "os": "linux"},
            {"architecture": "arm64", "os": "linux", "variant": "v8"},
        ]
        configs = []
        for entry in entries:
            assert entry["mediaType"] == MEDIA_MANIFEST
            manifest = _blob(tar, entry["digest"])
            config_ref = manifest["config"]
            assert isinstance(config_ref, dict)
            configs.append(_blob(tar, config_ref["digest"]))
        assert [(c["architecture"], c.get("variant")) for c in configs] == [
            ("amd64", None),
            ("arm64", "v8"),
        ]
        # The shared layer is stored once; docker's manifest.json holds the first platform.
        # One shared layer, per platform a layer, config and manifest, and the index.
        assert len([n for n in members if n.startswith("blobs/")]) == 1 + 2 * 3 + 1
        docker = tar.extractfile("manifest.json")
        assert docker is not None
        first_config = _blob(tar, entries[0]["digest"])["config"]
        assert isinstance(first_config, dict)
        assert (
            json.loads(docker.read())[0]["Config"] == "blobs/sha256/" + first_config["digest"][7:]
        )
    assert read_names(archive) == NAMES
    assert read_platforms(archive) == ["linux/amd64", "linux/arm64/v8"]


def test_each_platform_reads_back_its_own_layers(tmp_path: Path) -> None:
    archive = tmp_path / "multi.tar"
    write_index_archive(archive, names=NAMES, images=[_image("amd64"), _image("arm64", "v8")])

    def tool(architecture: str | None) -> int:
        members = {m.name: m for m in iter_layer_members(archive, architecture=architecture)}
        return members["usr/bin/tool"].size

    assert tool(None) == tool("amd64") == len(b"binary for amd64\n")
    assert tool("arm64") == len(b"binary for arm64\n")
    with pytest.raises(ValueError, match="no image for architecture riscv64"):
        list(iter_layer_members(archive, architecture="riscv64"))


def test_single_platform_archives_read_back_by_architecture(tmp_path: Path) -> None:
    archive = tmp_path / "one.tar"
    layer = LayerBuilder()
    layer.add_file("a", b"x")
    write_archive(
        archive, names=NAMES, layers=[("a", layer)], config=ImageConfig(), architecture="arm64"
    )
    assert read_platforms(archive) == ["linux/arm64"]
    assert [m.name for m in iter_layer_members(archive, architecture="arm64")] == ["a"]
    with pytest.raises(ValueError, match="no image for architecture amd64"):
        list(iter_layer_members(archive, architecture="amd64"))


def test_index_archives_are_reproducible(tmp_path: Path) -> None:
    images = [_image("amd64"), _image("arm64", "v8")]
    a = write_index_archive(tmp_path / "a.tar", names=NAMES, images=images)
    b = write_index_archive(tmp_path / "b.tar", names=NAMES, images=images)
    assert a == b
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_bad_index_input_is_refused_before_writing(tmp_path: Path) -> None:
    out = tmp_path / "bad.tar"
    with pytest.raises(ValueError, match="at least one platform"):
        write_index_archive(out, names=NAMES, images=[])
    with pytest.raises(ValueError, match="at least one name"):
        write_index_archive(out, names=[], images=[_image("amd64")])
    with pytest.raises(ValueError, match="platforms repeat"):
        write_index_archive(out, names=NAMES, images=[_image("amd64"), _image("amd64")])
    assert not list(tmp_path.iterdir())
