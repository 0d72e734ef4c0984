"""Locally built OCI archives: valid layout, digests, and loadable by a real runtime."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from dra_e2e import images


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("img") / "busybox.oci.tar"
    spec = images.ImageSpec(reference="docker.io/dra-e2e/unit:1.0", cmd=("/bin/echo", "hi"))
    return images.write_oci_archive(path, spec)


def test_layout_and_digests_are_consistent(archive: Path) -> None:
    with tarfile.open(archive) as tar:
        files = {m.name: tar.extractfile(m) for m in tar.getmembers() if m.isfile()}
        blobs = {}
        for name, fh in files.items():
            assert fh is not None
            data = fh.read()
            if name.startswith("blobs/sha256/"):
                assert hashlib.sha256(data).hexdigest() == name.rsplit("/", 1)[1]
            blobs[name] = data
    index = json.loads(blobs["index.json"])
    desc = index["manifests"][0]
    assert desc["annotations"]["io.containerd.image.name"] == "docker.io/dra-e2e/unit:1.0"
    assert desc["annotations"]["org.opencontainers.image.ref.name"] == "1.0"
    manifest = json.loads(blobs[f"blobs/sha256/{desc['digest'].split(':')[1]}"])
    config = json.loads(blobs[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["config"]["Cmd"] == ["/bin/echo", "hi"]
    layer = blobs[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    diff_id = "sha256:" + hashlib.sha256(gzip.decompress(layer)).hexdigest()
    assert config["rootfs"]["diff_ids"] == [diff_id]
    assert "docker.io/dra-e2e/unit:1.0" in json.loads(blobs["manifest.json"])[0]["RepoTags"]


def test_layer_has_busybox_and_applets() -> None:
    layer = images.busybox_layer(extra_files=(("/etc/motd", b"hi\n", 0o644),))
    with tarfile.open(fileobj=io.BytesIO(layer.tar_bytes())) as tar:
        names = set(tar.getnames())
        sh = tar.getmember("bin/sh")
        tmp = tar.getmember("tmp")
    assert {"bin/busybox", "bin/sleep", "etc/passwd", "etc/motd"} <= names
    assert sh.issym()
    assert sh.linkname == "busybox"
    assert tmp.mode == 0o1777


def test_extra_files_replace_the_defaults() -> None:
    passwd = b"root:x:0:0::/:/bin/sh\n"
    layer = images.busybox_layer(extra_files=(("/etc/passwd", passwd, 0o644),))
    assert layer.file_data("etc/passwd") == passwd


@pytest.mark.podman
def test_podman_loads_and_runs_the_archive(archive: Path) -> None:
    podman = shutil.which("podman")
    if podman is None:
        pytest.skip("podman not installed")
    loaded = subprocess.run(
        [podman, "load", "-i", str(archive)], capture_output=True, text=True, check=False
    )
    assert loaded.returncode == 0, loaded.stderr
    try:
        run = subprocess.run(
            [podman, "run", "--rm", "--runtime", "runc", "--network", "none",
             "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
             "docker.io/dra-e2e/unit:1.0", "/bin/sh", "-c", "echo ok-$((6*7))"],
            capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert run.stdout.strip() == "ok-42"
    finally:
        subprocess.run([podman, "rmi", "-f", "docker.io/dra-e2e/unit:1.0"], capture_output=True)
