"""The archive writer: a consistent OCI layout and docker-save manifest, reproducibly."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest
from dra_oci import (
    EPOCH,
    MEDIA_LAYER,
    PATH_ENV,
    ImageConfig,
    LayerBuilder,
    iter_layer_members,
    read_names,
    write_archive,
)

NAMES = ["docker.io/example/unit:1.0", "docker.io/example/unit:latest"]


def _layer() -> LayerBuilder:
    layer = LayerBuilder()
    layer.add_file("/usr/bin/tool", b"#!/bin/sh\necho hi\n", mode=0o755)
    layer.add_symlink("bin", "usr/bin")
    layer.add_hardlink("usr/bin/tool2", "/usr/bin/tool")
    layer.add_dir("tmp", mode=0o1777)
    return layer


def _write(path: Path) -> str:
    extra = LayerBuilder()
    extra.add_file("etc/motd", b"hi\n")
    config = ImageConfig(env=[PATH_ENV], cmd=["/usr/bin/tool"], labels={"a": "b"}, user="1000")
    return write_archive(
        path, names=NAMES, layers=[("base", _layer()), ("motd", extra)], config=config
    )


def _blobs(archive: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                out[member.name] = handle.read()
    return out


def test_layout_manifest_config_and_layers_agree(tmp_path: Path) -> None:
    archive = tmp_path / "img.tar"
    digest = _write(archive)
    blobs = _blobs(archive)
    for name, data in blobs.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
    assert json.loads(blobs["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads(blobs["index.json"])
    assert [m["digest"] for m in index["manifests"]] == [digest, digest]
    assert [m["annotations"]["org.opencontainers.image.ref.name"] for m in index["manifests"]] == [
        "1.0",
        "latest",
    ]
    manifest = json.loads(blobs[f"blobs/sha256/{digest.split(':')[1]}"])
    assert [layer["mediaType"] for layer in manifest["layers"]] == [MEDIA_LAYER, MEDIA_LAYER]
    config = json.loads(blobs[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["config"]["Cmd"] == ["/usr/bin/tool"]
    assert config["config"]["Labels"] == {"a": "b"}
    assert config["config"]["User"] == "1000"
    assert [h["created_by"] for h in config["history"]] == ["base", "motd"]
    diff_ids = [
        "sha256:"
        + hashlib.sha256(gzip.decompress(blobs[f"blobs/sha256/{d['digest'][7:]}"])).hexdigest()
        for d in manifest["layers"]
    ]
    assert config["rootfs"]["diff_ids"] == diff_ids
    docker = json.loads(blobs["manifest.json"])[0]
    assert docker["RepoTags"] == NAMES
    assert docker["Layers"] == [f"blobs/sha256/{d['digest'][7:]}" for d in manifest["layers"]]


def test_same_inputs_give_the_same_bytes(tmp_path: Path) -> None:
    first, second = tmp_path / "a.tar", tmp_path / "sub" / "b.tar"
    assert _write(first) == _write(second)
    assert first.read_bytes() == second.read_bytes()
    assert not list(tmp_path.rglob("*.part"))


def test_layers_read_back_with_parents_first_and_fixed_ownership(tmp_path: Path) -> None:
    archive = tmp_path / "img.tar"
    _write(archive)
    assert read_names(archive) == NAMES
    members = list(iter_layer_members(archive))
    names = [m.name for m in members]
    assert names[:6] == ["bin", "tmp", "usr", "usr/bin", "usr/bin/tool", "usr/bin/tool2"]
    assert names[6:] == ["etc", "etc/motd"]
    assert all(m.uid == 0 and m.gid == 0 and m.mtime == EPOCH for m in members)
    by_name = {m.name: m for m in members}
    assert by_name["tmp"].mode == 0o1777
    assert by_name["bin"].issym()
    assert by_name["bin"].linkname == "usr/bin"
    assert by_name["usr/bin/tool2"].islnk()
    assert by_name["usr/bin/tool2"].linkname == "usr/bin/tool"


def test_the_first_entry_for_a_path_wins() -> None:
    layer = LayerBuilder()
    layer.add_dir("etc", mode=0o700)
    layer.add_file("etc/a", b"one")
    layer.add_dir("etc", mode=0o755)
    layer.add_file("etc/a", b"two")
    assert layer.file_data("/etc/a") == b"one"
    assert layer.file_data("etc") is None
    assert "etc" in layer
    with tarfile.open(fileobj=io.BytesIO(layer.tar_bytes())) as tar:
        assert tar.getmember("etc").mode == 0o700


def test_add_tree_keeps_modes_and_links(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "run.sh").write_text("#!/bin/sh\n")
    (root / "sub" / "run.sh").chmod(0o755)
    (root / "data.txt").write_text("x")
    (root / "link").symlink_to("data.txt")
    layer = LayerBuilder()
    layer.add_tree(root, prefix="/opt/app")
    assert layer.paths() == [
        "opt",
        "opt/app",
        "opt/app/data.txt",
        "opt/app/link",
        "opt/app/sub",
        "opt/app/sub/run.sh",
    ]
    with tarfile.open(fileobj=io.BytesIO(layer.tar_bytes())) as tar:
        assert tar.getmember("opt/app/sub/run.sh").mode == 0o755
        assert tar.getmember("opt/app/data.txt").mode == 0o644
        assert tar.getmember("opt/app/link").linkname == "data.txt"


def test_an_image_needs_a_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one name"):
        write_archive(tmp_path / "x.tar", names=[], layers=[], config=ImageConfig())
