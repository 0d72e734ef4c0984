"""CDI content of the real (NVML) backend, over temp driver and /dev roots."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_kubelet_plugin.container_edits import NvmlEdits
from dra_kubelet_plugin.core.errors import ClaimRef, DeviceNodeMissingError
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_nvlib import DeviceLibConfig, open_device_lib

REF = ClaimRef(namespace="default", name="c", uid="u1")


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    dev = tmp_path / "host"
    (dev / "dev").mkdir(parents=True)
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / "dev" / name).touch()
    driver = tmp_path / "driver"
    lib = driver / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.570.133.20").touch()
    (lib / "libcuda.so.1").symlink_to("libcuda.so.570.133.20")
    (lib / "libnvidia-ml.so.570.133.20").touch()
    (lib / "libnvidia-ml.so.1").symlink_to("libnvidia-ml.so.570.133.20")
    (driver / "usr" / "bin").mkdir(parents=True)
    (driver / "usr" / "bin" / "nvidia-smi").touch()
    return dev, driver


def devices(tmp_path: Path, fleet: str = "2xH100-80GB") -> list[NodeDevice]:
    config = DeviceLibConfig(
        backend="fake", node_name="n1", fake_fleet=fleet, fake_state_path=tmp_path / "f.json"
    )
    with open_device_lib(config) as lib:
        return build_inventory(lib.gpus())


def test_gpu_gets_its_node_control_nodes_driver_files_and_void_visible_devices(
    tmp_path: Path, roots: tuple[Path, Path]
) -> None:
    dev, driver = roots
    edits = NvmlEdits(driver_root=driver, dev_root=dev)
    gpu1 = devices(tmp_path)[1]
    own = edits.device_edits(REF, gpu1)
    # Checked below the dev root the plugin sees, named by the host path in the spec.
    assert [(n.path, n.host_path) for n in own.device_nodes] == [("/dev/nvidia1", None)]
    common = edits.claim_edits(REF, [gpu1])
    assert common.env == ("NVIDIA_VISIBLE_DEVICES=void",)
    assert [n.path for n in common.device_nodes] == ["/dev/nvidiactl", "/dev/nvidia-uvm"]
    mounts = {m.container_path: m.host_path for m in common.mounts}
    real = str(driver / "usr/lib/x86_64-linux-gnu/libcuda.so.570.133.20")
    as_host = NvmlEdits(
        driver_root=Path("/run/nvidia/driver"), container_driver_root=driver, dev_root=dev
    ).claim_edits(REF, [gpu1])
    host_mounts = {m.container_path: m.host_path for m in as_host.mounts}
    assert host_mounts["/usr/lib/x86_64-linux-gnu/libcuda.so.1"] == (
        "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.570.133.20"
    )
    assert mounts["/usr/lib/x86_64-linux-gnu/libcuda.so.570.133.20"] == real
    assert mounts["/usr/lib/x86_64-linux-gnu/libcuda.so.1"] == real
    assert "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1" in mounts
    assert mounts["/usr/bin/nvidia-smi"] == str(driver / "usr/bin/nvidia-smi")


def test_missing_device_node_fails_the_prepare_instead_of_writing_a_partial_spec(
    tmp_path: Path, roots: tuple[Path, Path]
) -> None:
    dev, driver = roots
    (dev / "dev" / "nvidia1").unlink()
    edits = NvmlEdits(driver_root=driver, dev_root=dev)
    with pytest.raises(DeviceNodeMissingError, match="nvidia1"):
        edits.device_edits(REF, devices(tmp_path)[1])
    (dev / "dev" / "nvidiactl").unlink()
    with pytest.raises(DeviceNodeMissingError, match="nvidiactl"):
        edits.claim_edits(REF, devices(tmp_path)[:1])


def test_mig_device_gets_parent_node_and_capability_nodes(tmp_path: Path) -> None:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="1xA100-40GB:mig",
        fake_state_path=tmp_path / "f.json",
    )
    with open_device_lib(config) as lib:
        parent = lib.gpus()[0]
        mig = lib.create_mig_device(parent.uuid, profile_id=19, placement_start=0)
        (device,) = build_inventory(lib.gpus())
    dev = tmp_path / "host"
    (dev / "dev" / "nvidia-caps").mkdir(parents=True)
    for name in ("nvidia0", "nvidia-caps/nvidia-cap21", "nvidia-caps/nvidia-cap22"):
        (dev / "dev" / name).touch()
    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia-caps").mkdir(parents=True)
    (proc / "driver" / "nvidia-caps" / "mig-minors").write_text(
        f"config 1\nmonitor 2\ngpu0/gi{mig.gi_id}/access 21\n"
        f"gpu0/gi{mig.gi_id}/ci{mig.ci_id}/access 22\ngpu0/gi9/access 99\n"
    )
    edits = NvmlEdits(driver_root=tmp_path, dev_root=dev, proc_root=proc)
    nodes = [n.path for n in edits.device_edits(REF, device).device_nodes]
    assert nodes == [
        "/dev/nvidia0",
        "/dev/nvidia-caps/nvidia-cap21",
        "/dev/nvidia-caps/nvidia-cap22",
    ]
