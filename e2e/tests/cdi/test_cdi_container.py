"""containerd runs a container from our real-GPU CDI spec, with NVIDIA's own hook program.

The spec is what the plugin writes for a claim on real GPUs (``NvmlEdits`` over a synthetic
driver root, ``cdi_support``), naming ``nvidia-cdi-hook`` built from nvidia-container-toolkit
(``dra_e2e.toolkit``). The harness node's containerd runs a container with that CDI device
(``ctr run --device <CDI id>``, the same CDI library as the CRI path) and runc runs the hooks:
``ldconfig -p`` inside must list ``libcuda.so.1`` (in the ld.so.cache that ``update-ldcache``
wrote), and the links ``create-symlinks`` made must be there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cdi_support import make_driver_root
from dra_e2e import images
from dra_e2e.handle import ClusterHandle
from dra_e2e.toolkit import Toolkit, build_toolkit
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_plugin.cdi import GPU_CDI, cdi_device_id, render_claim_spec
from dra_kubelet_plugin.container_edits import NvmlEdits
from dra_kubelet_plugin.inventory import build_inventory
from dra_nvlib import DeviceLibConfig, open_device_lib
from dra_nvlib.mock_nvml_build import build_mock_nvml

pytestmark = pytest.mark.e2e

#: Where ``ctr`` (CDI's default spec dirs) looks for specs; the CRI path uses the node's own.
CTR_CDI_DIR = Path("/var/run/cdi")
LDCONFIG = Path("/sbin/ldconfig")


@pytest.fixture(scope="module")
def toolkit() -> Toolkit:
    return build_toolkit(progress=lambda msg: print(msg, file=sys.stderr, flush=True))


@pytest.fixture
def image(e2e_cluster: ClusterHandle, tmp_path: Path) -> str:
    """busybox plus glibc's static ``ldconfig`` (what ``update-ldcache`` and the test run)."""
    if e2e_cluster.local is None:
        pytest.skip("ctr runs against the local cluster's containerd")
    if not LDCONFIG.is_file():
        pytest.skip(f"{LDCONFIG} (glibc's ldconfig) is not installed on this machine")
    reference = f"docker.io/dra-e2e/ldconfig:{uuid.uuid4().hex[:8]}"
    extra = (
        ("sbin/ldconfig", LDCONFIG.read_bytes(), 0o755),
        ("etc/ld.so.conf", b"include /etc/ld.so.conf.d/*.conf\n", 0o644),
        ("etc/ld.so.conf.d/.keep", b"", 0o644),
    )
    archive = images.write_oci_archive(
        tmp_path / "ldconfig.tar", images.ImageSpec(reference=reference, extra_files=extra)
    )
    assert e2e_cluster.import_image(archive) == [reference]
    return reference


@pytest.fixture
def claim_spec(tmp_path: Path, toolkit: Toolkit) -> Iterator[str]:
    """Our spec of a one-GPU claim, written where ctr finds it; its CDI device ID."""
    driver = make_driver_root(tmp_path / "root", nvml_library=build_mock_nvml().library, gpus=1)
    edits = NvmlEdits(
        driver_root=driver.root,
        dev_root=driver.root,
        host_dev_root=driver.root,
        proc_root=tmp_path / "proc",
        cdi_hook_path=str(toolkit.nvidia_cdi_hook),
    )
    config = DeviceLibConfig(
        backend="fake", node_name="n1", fake_fleet="1xA100-40GB", fake_state_path=tmp_path / "f"
    )
    with open_device_lib(config) as lib:
        (gpu,) = build_inventory(lib.gpus())
    claim = ClaimRef(namespace="default", name="cdi", uid=f"e2e-{uuid.uuid4()}")
    spec = render_claim_spec(
        claim_uid=claim.uid,
        devices=[(gpu.name, edits.device_edits(claim, gpu))],
        common=[edits.claim_edits(claim, [gpu])],
    )
    store = CDIStore(CTR_CDI_DIR, kind=GPU_CDI)
    store.write(claim.uid, spec)
    try:
        yield cdi_device_id(claim.uid, gpu.name)
    finally:
        store.remove(claim.uid)


def test_ldconfig_in_the_container_lists_libcuda_through_our_spec_and_the_real_hook(
    e2e_cluster: ClusterHandle, image: str, claim_spec: str
) -> None:
    cluster = e2e_cluster.local
    assert cluster is not None
    socket = cluster.state.nodes[0].paths.containerd_socket
    name = f"cdi-{uuid.uuid4().hex[:8]}"
    script = "/sbin/ldconfig -p; ls -l /usr/lib/x86_64-linux-gnu/libcuda.so /dev/nvidia0"
    proc = subprocess.run(
        [str(cluster.bins.ctr), "--address", str(socket), "-n", "k8s.io", "run", "--rm",
         "--device", claim_spec, image, name, "/bin/sh", "-c", script],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PATH": f"{cluster.bins.containerd_dir}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    libcuda = [line for line in lines if line.strip().startswith("libcuda.so.1 ")]
    assert libcuda, proc.stdout
    assert libcuda[0].rstrip().endswith("=> /usr/lib/x86_64-linux-gnu/libcuda.so.1"), libcuda
    assert any("libcuda.so -> libcuda.so.1" in line for line in lines), proc.stdout
    assert any(line.startswith("crw") and "/dev/nvidia0" in line for line in lines), proc.stdout
