"""The real CDI consumer: podman reads the plugin's spec and sets up the container.

Needs podman and runc (Debian packages, installed by ``make prepare``) and root, because
podman 4.3 reads CDI specs only from /etc/cdi and /var/run/cdi. The image is built locally
from Debian's busybox-static (no registry is reachable).
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubelet_plugin_support import (
    PluginDirs,
    PluginProcess,
    ReferenceProtos,
    make_claim,
    write_claim,
)

pytestmark = pytest.mark.podman

IMAGE = "localhost/dra-kubelet-plugin-test-busybox:latest"
CDI_ROOT = Path("/var/run/cdi")
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
    "--network",
    "none",
]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A busybox image imported from a local tarball."""
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman/runc not installed (run make prepare)")
    busybox = Path("/bin/busybox")
    if not busybox.exists():
        pytest.skip("busybox-static not installed (run make prepare)")
    exists = subprocess.run(["podman", "image", "exists", IMAGE], check=False)
    if exists.returncode == 0:
        return IMAGE
    root = tmp_path_factory.mktemp("image")
    tar_path = root / "rootfs.tar"
    with tarfile.open(tar_path, "w") as tar:
        for d in ("bin", "usr", "usr/bin", "dev", "proc", "sys", "etc", "tmp"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        tar.add(busybox, arcname="bin/busybox")
        for applet in ("sh", "env", "ls", "cat", "stat", "grep", "sort", "echo", "test"):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            tar.addfile(link)
    subprocess.run(["podman", "import", str(tar_path), IMAGE], check=True, capture_output=True)
    return IMAGE


@pytest.fixture
def cdi_plugin(plugin_dirs: PluginDirs) -> Iterator[PluginProcess]:
    """The plugin writing its specs where podman reads them."""
    proc = PluginProcess(plugin_dirs, extra=["--cdi-root", str(CDI_ROOT)])
    proc.start()
    yield proc
    proc.stop()


def test_podman_container_gets_env_device_nodes_and_fake_nvidia_smi(
    image: str, cdi_plugin: PluginProcess, reference: ReferenceProtos
) -> None:
    claim = make_claim(name=f"podman-{uuid.uuid4().hex[:6]}", devices=["gpu-1", "gpu-3"])
    write_claim(cdi_plugin.dirs.claims, claim)
    uid = claim["metadata"]["uid"]
    ref = ("default", claim["metadata"]["name"], uid)
    with cdi_plugin.channel() as ch:
        response = reference.prepare(ch, [ref])
        entry = response.claims[uid]
        assert entry.error == ""
        cdi_ids = [i for d in entry.devices for i in d.cdi_device_ids]
        try:
            args = [*PODMAN_RUN]
            for cdi_id in cdi_ids:
                args += ["--device", cdi_id]
            script = (
                "env | grep ^NVIDIA_FAKE_ | sort; "
                "for n in /dev/nvidia1 /dev/nvidia3; do stat -c '%n %F' $n; done; "
                "nvidia-smi -L"
            )
            out = subprocess.run(
                [*args, image, "/bin/sh", "-c", script],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert out.returncode == 0, out.stderr
        finally:
            gone = reference.unprepare(ch, [ref])
    assert gone.claims[uid].error == ""
    lines = out.stdout.splitlines()
    assert [d.device_name for d in entry.devices] == ["gpu-1", "gpu-3"]
    env = dict(line.split("=", 1) for line in lines if line.startswith("NVIDIA_FAKE_"))
    gpu1, gpu3 = env["NVIDIA_FAKE_GPU_1_UUID"], env["NVIDIA_FAKE_GPU_3_UUID"]
    assert env["NVIDIA_FAKE_SMI_1_0"].startswith(f"{gpu1}|")
    assert env["NVIDIA_FAKE_SMI_3_0"].startswith(f"{gpu3}|")
    assert env["NVIDIA_FAKE_GPU_1_PRODUCT_NAME"] == "NVIDIA H100 80GB HBM3"
    assert env["NVIDIA_FAKE_GPU_1_MEMORY"].endswith("Mi")
    assert "/dev/nvidia1 character special file" in lines
    assert "/dev/nvidia3 character special file" in lines
    assert f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu1})" in lines
    assert f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {gpu3})" in lines
    assert not (CDI_ROOT / f"k8s.gpu.nvidia.com-claim_{uid}.json").exists()


def test_podman_container_with_two_claims_lists_both_gpus(
    image: str, cdi_plugin: PluginProcess, reference: ReferenceProtos
) -> None:
    # One container, two claims of one GPU each: as on real GPUs it sees both.
    claims = [
        make_claim(name=f"podman-{uuid.uuid4().hex[:6]}", devices=[device])
        for device in ("gpu-2", "gpu-0")
    ]
    refs = []
    for claim in claims:
        write_claim(cdi_plugin.dirs.claims, claim)
        refs.append(("default", claim["metadata"]["name"], claim["metadata"]["uid"]))
    with cdi_plugin.channel() as ch:
        response = reference.prepare(ch, refs)
        try:
            args = [*PODMAN_RUN]
            for _, _, uid in refs:
                assert response.claims[uid].error == ""
                for device in response.claims[uid].devices:
                    for cdi_id in device.cdi_device_ids:
                        args += ["--device", cdi_id]
            script = "env | grep ^NVIDIA_FAKE_GPU_.*_UUID= | sort; nvidia-smi -L"
            out = subprocess.run(
                [*args, image, "/bin/sh", "-c", script],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert out.returncode == 0, out.stderr
        finally:
            gone = reference.unprepare(ch, refs)
    assert all(gone.claims[uid].error == "" for _, _, uid in refs)
    lines = out.stdout.splitlines()
    env = dict(line.split("=", 1) for line in lines if line.startswith("NVIDIA_FAKE_"))
    gpu0, gpu2 = env["NVIDIA_FAKE_GPU_0_UUID"], env["NVIDIA_FAKE_GPU_2_UUID"]
    smi = [line for line in lines if line.startswith("GPU ")]
    assert smi == [
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu0})",
        f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {gpu2})",
    ]


def test_podman_refuses_a_device_of_an_unprepared_claim(image: str) -> None:
    out = subprocess.run(
        [
            *PODMAN_RUN,
            "--device",
            f"k8s.gpu.nvidia.com/claim={uuid.uuid4()}-gpu-0",
            image,
            "/bin/true",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "k8s.gpu.nvidia.com/claim" in out.stderr
