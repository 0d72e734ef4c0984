"""The registry-free image builds (images/build_image.py): archive format, content, and that the
images run under a real runtime (podman with runc, as on this machine)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

# --import-mode=importlib gives tests no package: the shared helpers are found by path.
from chart_helpers import REPO
from dra_e2e.image_aliases import archive_aliases
from dra_oci import read_platforms

BUILD = REPO / "images" / "build_image.py"
PODMAN_RUN = [
    "podman",
    "run",
    "--rm",
    "--runtime",
    "runc",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
]

pytestmark = pytest.mark.slow
# ELF e_machine of aarch64 binaries (EM_AARCH64).
EM_AARCH64 = 183
QEMU = Path("/usr/bin/qemu-aarch64-static")


def _build(kind: str, out: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, str(BUILD), kind, "--output", str(out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split()
    assert lines[0] == str(out)
    return lines[1:]


@pytest.fixture(scope="session")
def driver_archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The driver image archive and its names."""
    out = tmp_path_factory.mktemp("images") / "driver.tar"
    return out, _build("driver", out)


@pytest.fixture(scope="session")
def workload_archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The stand-in workload image archive and its names."""
    out = tmp_path_factory.mktemp("images") / "workload.tar"
    return out, _build("workload", out)


def _read(tar: tarfile.TarFile, name: str) -> bytes:
    member = tar.extractfile(name)
    assert member is not None, name
    return member.read()


def _layers(archive: Path) -> list[dict[str, tarfile.TarInfo]]:
    with tarfile.open(archive) as tar:
        manifest = json.loads(_read(tar, "manifest.json"))[0]
        out = []
        for path in manifest["Layers"]:
            with tarfile.open(fileobj=gzip.GzipFile(fileobj=tar.extractfile(path))) as layer:
                out.append({m.name: m for m in layer.getmembers()})
        return out


def _file(archive: Path, name: str) -> bytes:
    with tarfile.open(archive) as tar:
        manifest = json.loads(_read(tar, "manifest.json"))[0]
        for path in manifest["Layers"]:
            with tarfile.open(fileobj=gzip.GzipFile(fileobj=tar.extractfile(path))) as layer:
                try:
                    data = layer.extractfile(name)
                except KeyError:
                    continue
                assert data is not None
                return data.read()
    raise AssertionError(f"{name} is not in the image")


def _workspace_console_scripts() -> set[str]:
    scripts: set[str] = set()
    for pyproject in sorted((REPO / "packages").glob("*/pyproject.toml")):
        project: dict[str, Any] = tomllib.loads(pyproject.read_text())["project"]
        scripts.update(project.get("scripts", {}))
    return scripts


def test_archive_is_a_valid_oci_layout_and_docker_archive(
    workload_archive: tuple[Path, list[str]],
) -> None:
    archive, names = workload_archive
    # Never the real images' names: `docker load` of this archive must not replace them.
    assert names == [
        "docker.io/dra-driver-nvidia-gpu-py/standin-cuda:12.1.0-base-ubuntu22.04",
        "docker.io/dra-driver-nvidia-gpu-py/standin-cuda:12.0.0-base-ubuntu22.04",
        "docker.io/dra-driver-nvidia-gpu-py/standin-ubuntu:22.04",
        "docker.io/dra-driver-nvidia-gpu-py/standin-cuda-sample:nbody-cuda11.6.0-ubuntu18.04",
    ]
    with tarfile.open(archive) as tar:
        assert json.loads(_read(tar, "oci-layout")) == {"imageLayoutVersion": "1.0.0"}
        index = json.loads(_read(tar, "index.json"))
        refs = [m["annotations"]["io.containerd.image.name"] for m in index["manifests"]]
        assert refs == names
        # Every blob is stored under its own digest.
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith("blobs/sha256/"):
                digest = hashlib.sha256(_read(tar, member.name)).hexdigest()
                assert member.name.endswith(digest)
        manifest = json.loads(_read(tar, "blobs/sha256/" + index["manifests"][0]["digest"][7:]))
        config = json.loads(_read(tar, "blobs/sha256/" + manifest["config"]["digest"][7:]))
        diff_ids = []
        for layer in manifest["layers"]:
            blob = _read(tar, "blobs/sha256/" + layer["digest"][7:])
            assert layer["size"] == len(blob)
            diff_ids.append("sha256:" + hashlib.sha256(gzip.decompress(blob)).hexdigest())
        assert config["rootfs"]["diff_ids"] == diff_ids
        docker = json.loads(_read(tar, "manifest.json"))
        assert docker[0]["RepoTags"] == names


def test_only_the_harness_names_the_stand_in_after_the_real_images(
    workload_archive: tuple[Path, list[str]],
) -> None:
    archive, names = workload_archive
    # What e2e-cluster's import tags inside the node's containerd, so the seed's manifests run.
    assert archive_aliases(archive) == [
        (names[0], "docker.io/nvidia/cuda:12.1.0-base-ubuntu22.04"),
        (names[0], "docker.io/nvidia/cuda:12.0.0-base-ubuntu22.04"),
        (names[0], "docker.io/library/ubuntu:22.04"),
        (names[0], "nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.6.0-ubuntu18.04"),
    ]


def test_builds_are_reproducible(workload_archive: tuple[Path, list[str]], tmp_path: Path) -> None:
    archive, _ = workload_archive
    again = tmp_path / "again.tar"
    _build("workload", again)
    assert again.read_bytes() == archive.read_bytes()


def test_workload_image_has_bash_and_a_userland(workload_archive: tuple[Path, list[str]]) -> None:
    (layer,) = _layers(workload_archive[0])
    for path in ("usr/bin/bash", "usr/bin/busybox", "usr/bin/sleep", "usr/bin/sh", "etc/passwd"):
        assert path in layer, path
    # NVIDIA's sharing demos run /tmp/sample (the nbody sample) of the image they name.
    assert "tmp/sample" in layer
    assert layer["bin"].issym()
    assert layer["bin"].linkname == "usr/bin"
    assert not any(name.startswith("usr/share/doc/") for name in layer)


def test_driver_image_content(driver_archive: tuple[Path, list[str]]) -> None:
    archive, names = driver_archive
    chart = (REPO / "deployments/helm/dra-driver-nvidia-gpu/Chart.yaml").read_text()
    app_version = next(
        line.split(":", 1)[1].strip().strip('"')
        for line in chart.splitlines()
        if line.startswith("appVersion:")
    )
    assert names == [f"docker.io/library/dra-driver-nvidia-gpu-py:{app_version}"]
    base, app = _layers(archive)
    assert base["usr/bin/python3"].linkname == "python3.11"
    assert "usr/bin/python3.11" in base
    assert "usr/lib/python3.11/__pycache__/os.cpython-311.pyc" in base
    status = _file(archive, "var/lib/dpkg/status").decode()
    assert "Package: python3.11-minimal\nStatus: install ok installed" in status
    for package in (
        "dra_api_types",
        "dra_nvlib",
        "dra_kube_client",
        "dra_kubelet_core",
        "dra_kubelet_plugin",
        "dra_computedomain",
        "dra_controller",
        "dra_cel",
        "dra_allocator",
        "kubectl_dra",
    ):
        assert f"opt/dra/site-packages/{package}/__init__.py" in app
    assert not any(n.startswith("opt/dra/site-packages/dra_e2e") for n in app)
    launchers = {n.rsplit("/", 1)[1] for n in app if n.startswith("usr/local/bin/")}
    assert launchers >= _workspace_console_scripts()
    with tarfile.open(archive) as tar:
        manifest = json.loads(_read(tar, "manifest.json"))[0]
        config = json.loads(_read(tar, manifest["Config"]))["config"]
    assert "PYTHONPATH=/opt/dra/site-packages" in config["Env"]


def test_driver_archive_is_one_image_index_for_amd64_and_arm64(
    driver_archive: tuple[Path, list[str]],
) -> None:
    archive, names = driver_archive
    assert read_platforms(archive) == ["linux/amd64", "linux/arm64/v8"]
    with tarfile.open(archive) as tar:
        (entry,) = json.loads(_read(tar, "index.json"))["manifests"]
        assert entry["mediaType"] == "application/vnd.oci.image.index.v1+json"
        assert entry["annotations"]["io.containerd.image.name"] == names[0]
        index = json.loads(_read(tar, "blobs/sha256/" + entry["digest"][7:]))
        configs = {}
        for desc in index["manifests"]:
            manifest = json.loads(_read(tar, "blobs/sha256/" + desc["digest"][7:]))
            config = json.loads(_read(tar, "blobs/sha256/" + manifest["config"]["digest"][7:]))
            configs[config["architecture"]] = config["config"]
    # Both platforms run the same way: same environment, command and console scripts.
    assert configs["amd64"] == configs["arm64"]


def _elf_machine(path: Path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF", path
    return int.from_bytes(header[18:20], "little")


@pytest.fixture(scope="session")
def arm64_rootfs(
    driver_archive: tuple[Path, list[str]], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    """The arm64 image's root filesystem, unpacked, and its environment (image config Env)."""
    root = tmp_path_factory.mktemp("arm64") / "rootfs"
    root.mkdir()
    with tarfile.open(driver_archive[0]) as tar:
        entry = json.loads(_read(tar, "index.json"))["manifests"][0]
        index = json.loads(_read(tar, "blobs/sha256/" + entry["digest"][7:]))
        (desc,) = [m for m in index["manifests"] if m["platform"]["architecture"] == "arm64"]
        manifest = json.loads(_read(tar, "blobs/sha256/" + desc["digest"][7:]))
        config = json.loads(_read(tar, "blobs/sha256/" + manifest["config"]["digest"][7:]))
        for layer in manifest["layers"]:
            data = gzip.decompress(_read(tar, "blobs/sha256/" + layer["digest"][7:]))
            with tarfile.open(fileobj=io.BytesIO(data)) as members:
                members.extractall(root, filter="tar")
    env = dict(e.split("=", 1) for e in config["config"]["Env"])
    return root, env


def test_arm64_image_holds_aarch64_python_and_native_extensions(
    arm64_rootfs: tuple[Path, dict[str, str]],
) -> None:
    root, _ = arm64_rootfs
    assert _elf_machine(root / "usr/bin/python3.11") == EM_AARCH64
    assert _elf_machine(root / "usr/lib/ld-linux-aarch64.so.1") == EM_AARCH64
    site = root / "opt/dra/site-packages"
    for pattern in ("grpc/_cython/cygrpc.cpython-311-*.so", "pydantic_core/_pydantic_core.*.so"):
        (extension,) = site.glob(pattern)
        assert "aarch64" in extension.name, extension
        assert _elf_machine(extension) == EM_AARCH64
    # No x86-64 code anywhere in the arm64 image.
    for so in site.rglob("*.so*"):
        assert _elf_machine(so) == EM_AARCH64, so


def _in_arm64_rootfs(
    root: Path, env: dict[str, str], *argv: str
) -> subprocess.CompletedProcess[str]:
    """``argv`` inside the arm64 root filesystem: chroot in a user namespace (no root, no
    binfmt_misc registration needed), the program started by qemu-user copied into it."""
    qemu = root / "tmp" / QEMU.name
    if not qemu.exists():
        shutil.copy2(QEMU, qemu)
    return subprocess.run(
        ["unshare", "--user", "--map-root-user", "chroot", str(root), f"/tmp/{QEMU.name}", *argv],
        env={**env, "HOME": "/root"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_arm64_image_runs_the_plugin_under_qemu_user(
    arm64_rootfs: tuple[Path, dict[str, str]],
) -> None:
    root, env = arm64_rootfs
    assert QEMU.is_file(), "qemu-user-static is not installed: make prepare"
    # grpc and pydantic_core import their aarch64 extension modules.
    check = "import platform, grpc, pydantic_core, dra_kubelet_plugin; print(platform.machine())"
    proc = _in_arm64_rootfs(root, env, "/usr/bin/python3", "-c", check)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["aarch64"]
    proc = _in_arm64_rootfs(
        root,
        env,
        "/usr/bin/python3",
        "/usr/local/bin/dra-kubelet-plugin",
        "--device-backend",
        "fake",
        "--fake-gpus",
        "2xH100-80GB",
        "--node-name",
        "n1",
        "--print-resource-slices",
    )
    assert proc.returncode == 0, proc.stderr
    slices = [s for s in yaml.safe_load_all(proc.stdout) if s]
    assert {s["kind"] for s in slices} == {"ResourceSlice"}
    devices = [d["name"] for s in slices for d in s["spec"].get("devices", [])]
    assert devices[:2] == ["gpu-0", "gpu-1"]


@pytest.fixture
def loaded(request: pytest.FixtureRequest) -> Iterator[list[str]]:
    """Loads an archive into podman's store for the test and removes it afterwards."""
    archive, names = request.getfixturevalue(request.param)
    subprocess.run(["podman", "load", "-i", str(archive)], check=True, capture_output=True)
    yield names
    subprocess.run(["podman", "rmi", "--force", *names], check=False, capture_output=True)


@pytest.mark.podman
@pytest.mark.parametrize("loaded", ["driver_archive"], indirect=True)
def test_driver_image_runs_read_only_without_capabilities(loaded: list[str]) -> None:
    check = (
        "import ssl, ctypes, sqlite3, json, grpc, pydantic, yaml, kubernetes;"
        "import dra_api_types, dra_nvlib, dra_kube_client, dra_kubelet_core,"
        " dra_kubelet_plugin, dra_computedomain, dra_controller;"
        "import dra_cel, dra_allocator, kubectl_dra;"
        "print('imports ok', ssl.OPENSSL_VERSION)"
    )
    proc = subprocess.run(
        [*PODMAN_RUN, "--read-only", "--cap-drop", "ALL", loaded[0], "python3", "-c", check],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "imports ok OpenSSL 3." in proc.stdout
    for script in sorted(_workspace_console_scripts()):
        proc = subprocess.run(
            [*PODMAN_RUN, "--read-only", "--cap-drop", "ALL", loaded[0], script, "--help"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, f"{script} --help: {proc.stderr}"
        assert "usage" in proc.stdout.lower()


@pytest.mark.podman
@pytest.mark.parametrize("loaded", ["workload_archive"], indirect=True)
def test_workload_image_runs_the_demo_specs_command(loaded: list[str]) -> None:
    # The command of NVIDIA's demo pods, minus nvidia-smi (the driver injects that).
    command = "echo started; trap 'exit 0' TERM; sleep 0.2 & wait; echo done"
    for name in loaded:
        proc = subprocess.run(
            [*PODMAN_RUN, name, "bash", "-c", command], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["started", "done"]


def test_dockerfile_app_stage_runs_on_a_plain_python(tmp_path: Path) -> None:
    """What images/Dockerfile runs in its build stage, with this machine's CPython 3.11."""
    dest = tmp_path / "stage"
    proc = subprocess.run(
        [sys.executable, str(BUILD), "app", "--dest", str(dest)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) >= _workspace_console_scripts()
    env = {**os.environ, "PYTHONPATH": str(dest / "site-packages")}
    for script in sorted(_workspace_console_scripts()):
        launcher = dest / "bin" / script
        assert launcher.read_text().startswith("#!/usr/bin/env python3\n")
        run = subprocess.run(
            [sys.executable, str(launcher), "--help"], env=env, capture_output=True, check=False
        )
        assert run.returncode == 0, run.stderr
    dockerfile = (REPO / "images" / "Dockerfile").read_text()
    assert "python images/build_image.py app --dest /stage" in dockerfile
    # docker buildx --platform linux/amd64,linux/arm64: each target's wheels, built natively.
    assert "FROM --platform=$BUILDPLATFORM ${PYTHON_IMAGE} AS build" in dockerfile
    assert '--platform "linux/${TARGETARCH}"' in dockerfile
    assert "COPY --from=build /stage/site-packages /opt/dra/site-packages" in dockerfile


@pytest.mark.parametrize("platforms", ["linux/riscv64", "linux/amd64,windows/amd64", ","])
def test_unknown_platforms_are_refused_before_building(platforms: str, tmp_path: Path) -> None:
    out = tmp_path / "driver.tar"
    proc = subprocess.run(
        [sys.executable, str(BUILD), "driver", "--output", str(out), "--platform", platforms],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "expected a comma-separated list of linux/amd64,linux/arm64" in proc.stderr
    assert not out.exists()
