"""CDI content of the real (NVML) backend, over temp driver, /dev and /proc roots.

The full comparison with nvidia-container-toolkit's own output is
``e2e/tests/cdi/test_toolkit_parity.py``; these are the rules one by one.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
from pathlib import Path

import pytest
from dra_kubelet_core.errors import ClaimRef, DeviceNodeMissingError
from dra_kubelet_plugin.container_edits import NvmlEdits
from dra_kubelet_plugin.driver_edits import FILE_MOUNT_OPTIONS
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_nvlib import DeviceLibConfig, open_device_lib
from elf_support import write_library
from ld_cache_support import ld_cache

REF = ClaimRef(namespace="default", name="c", uid="u1")
VERSION = "570.133.20"
LIB = "usr/lib/x86_64-linux-gnu"
HOOK = "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
PROC_DEVICES = "Character devices:\n  1 mem\n195 nvidia\n237 nvidia-caps\n510 nvidia-uvm\n\n"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root")


def _write_driver(driver: Path, version: str = VERSION, lib_dir: str = LIB) -> None:
    lib = driver / lib_dir
    write_library(lib, f"libcuda.so.{version}", "libcuda.so.1", "libcuda.so.1")
    (lib / "libcuda.so").symlink_to("libcuda.so.1")
    write_library(lib, f"libnvidia-ml.so.{version}", "libnvidia-ml.so.1", "libnvidia-ml.so.1")
    write_library(lib, f"libnvidia-glcore.so.{version}", f"libnvidia-glcore.so.{version}")
    (driver / "usr" / "bin").mkdir(parents=True, exist_ok=True)
    (driver / "usr" / "bin" / "nvidia-smi").write_text("#!/bin/sh\n")
    (driver / "usr" / "bin" / "nvidia-smi").chmod(0o755)


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    dev = tmp_path / "host"
    (dev / "dev").mkdir(parents=True)
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        (dev / "dev" / name).touch()
    driver = tmp_path / "driver"
    _write_driver(driver)
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "devices").write_text(PROC_DEVICES)
    return dev, driver, proc


def devices(tmp_path: Path, fleet: str = "2xH100-80GB") -> list[NodeDevice]:
    config = DeviceLibConfig(
        backend="fake", node_name="n1", fake_fleet=fleet, fake_state_path=tmp_path / "f.json"
    )
    with open_device_lib(config) as lib:
        return build_inventory(lib.gpus())


def test_gpu_gets_its_node_control_nodes_driver_files_and_void_visible_devices(
    tmp_path: Path, roots: tuple[Path, Path, Path]
) -> None:
    dev, driver, proc = roots
    edits = NvmlEdits(driver_root=driver, dev_root=dev, proc_root=proc, cdi_hook_path=HOOK)
    gpu1 = devices(tmp_path)[1]
    own = edits.device_edits(REF, gpu1)
    # Checked below the dev root the plugin sees, named by the host path in the spec.
    assert [(n.path, n.host_path) for n in own.device_nodes] == [("/dev/nvidia1", None)]
    common = edits.claim_edits(REF, [gpu1])
    assert common.env == (f"NVIDIA_CTK_LIBCUDA_DIR=/{LIB}", "NVIDIA_VISIBLE_DEVICES=void")
    assert [n.path for n in common.device_nodes] == [
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
        "/dev/nvidiactl",
    ]
    mounts = {m.container_path: m for m in common.mounts}
    assert set(mounts) == {
        "/usr/bin/nvidia-smi",
        f"/{LIB}/libcuda.so.{VERSION}",
        f"/{LIB}/libnvidia-glcore.so.{VERSION}",
        f"/{LIB}/libnvidia-ml.so.{VERSION}",
    }
    assert all(m.options == FILE_MOUNT_OPTIONS for m in common.mounts)
    assert mounts["/usr/bin/nvidia-smi"].host_path == str(driver / "usr/bin/nvidia-smi")
    as_host = NvmlEdits(
        driver_root=Path("/run/nvidia/driver"),
        container_driver_root=driver,
        dev_root=dev,
        proc_root=proc,
        cdi_hook_path=HOOK,
    ).claim_edits(REF, [gpu1])
    assert {m.host_path for m in as_host.mounts} == {f"/run/nvidia/driver{path}" for path in mounts}


def test_hooks_link_sonames_and_libcuda_so_and_update_the_ld_cache(
    tmp_path: Path, roots: tuple[Path, Path, Path]
) -> None:
    dev, driver, proc = roots
    edits = NvmlEdits(driver_root=driver, dev_root=dev, proc_root=proc, cdi_hook_path=HOOK)
    hooks = edits.claim_edits(REF, devices(tmp_path)[:1]).hooks
    assert [h.args[1] for h in hooks] == [
        "create-symlinks",
        "enable-cuda-compat",
        "update-ldcache",
        "disable-device-node-modification",
    ]
    assert all(h.path == HOOK and h.args[0] == "nvidia-cdi-hook" for h in hooks)
    assert all(h.hook_name == "createContainer" for h in hooks)
    links = hooks[0].args[2:]
    assert links == (
        "--link",
        f"libcuda.so.1::/{LIB}/libcuda.so",
        "--link",
        f"libcuda.so.{VERSION}::/{LIB}/libcuda.so.1",
        "--link",
        f"libnvidia-ml.so.{VERSION}::/{LIB}/libnvidia-ml.so.1",
    )
    assert hooks[1].args[2:] == (f"--host-driver-version={VERSION}",)
    assert hooks[2].args[2:] == ("--folder", f"/{LIB}")


def test_xorg_modules_are_mounted_and_the_glx_server_linked(
    tmp_path: Path, roots: tuple[Path, Path, Path]
) -> None:
    dev, driver, proc = roots
    # The library dir's nvidia/xorg comes before /usr/lib/xorg; the first of each wins.
    for directory in (f"{LIB}/nvidia/xorg", "usr/lib/xorg/modules/drivers"):
        (driver / directory).mkdir(parents=True)
        (driver / directory / "nvidia_drv.so").write_bytes(b"\0")
    extensions = driver / "usr/lib/xorg/modules/extensions"
    extensions.mkdir(parents=True)
    (extensions / f"libglxserver_nvidia.so.{VERSION}").write_bytes(b"\0")
    (extensions / "libglxserver_nvidia.so.1.2.3").write_bytes(b"\0")
    edits = NvmlEdits(driver_root=driver, dev_root=dev, proc_root=proc, cdi_hook_path=HOOK)
    common = edits.claim_edits(REF, devices(tmp_path)[:1])
    xorg = sorted(m.container_path for m in common.mounts if "xorg" in m.container_path)
    ext = "/usr/lib/xorg/modules/extensions"
    glx = f"{ext}/libglxserver_nvidia.so.{VERSION}"
    assert xorg == [f"/{LIB}/nvidia/xorg/nvidia_drv.so", glx]
    graphics = common.hooks[0]
    assert graphics.args[1:] == (
        "create-symlinks",
        "--link",
        f"libglxserver_nvidia.so.{VERSION}::{ext}/libglxserver_nvidia.so",
    )
    without_hook = NvmlEdits(driver_root=driver, dev_root=dev, proc_root=proc)
    linked = {
        m.container_path: m.host_path
        for m in without_hook.claim_edits(REF, devices(tmp_path)[:1]).mounts
    }
    assert linked[f"{ext}/libglxserver_nvidia.so"] == str(driver) + glx


def _drm_host(tmp_path: Path, bus: str) -> tuple[Path, Path]:
    """A host /dev with nvidia0 and card1/renderD128, and a /sys tying them to ``bus``."""
    dev = tmp_path / "host"
    dri = dev / "dev" / "dri"
    (dri / "by-path").mkdir(parents=True)
    (dev / "dev" / "nvidia0").touch()
    for name, minor in (("card1", 1), ("renderD128", 128)):
        os.mknod(dri / name, 0o666 | stat.S_IFCHR, os.makedev(226, minor))
    (dri / "by-path" / f"pci-{bus}-card").symlink_to("../card1")
    (dri / "by-path" / f"pci-{bus}-render").symlink_to("../renderD128")
    sys_root = tmp_path / "sys"
    for name in ("card1", "renderD128", "card9"):  # card9: in sysfs, not in /dev
        (sys_root / "bus/pci/devices" / bus / "drm" / name).mkdir(parents=True)
    return dev, sys_root


@needs_root
def test_gpu_gets_its_drm_nodes_and_a_hook_for_their_by_path_links(tmp_path: Path) -> None:
    gpu0 = devices(tmp_path)[0]
    bus = gpu0.gpu.pci_bus_id
    dev, sys_root = _drm_host(tmp_path, bus)
    edits = NvmlEdits(
        driver_root=tmp_path,
        dev_root=dev,
        proc_root=tmp_path,
        sys_root=sys_root,
        cdi_hook_path=HOOK,
    )
    own = edits.device_edits(REF, gpu0)
    assert [n.path for n in own.device_nodes] == [
        "/dev/nvidia0",
        "/dev/dri/card1",
        "/dev/dri/renderD128",
    ]
    (hook,) = own.hooks
    assert hook.path == HOOK
    assert hook.args == (
        "nvidia-cdi-hook",
        "create-symlinks",
        "--link",
        f"../card1::/dev/dri/by-path/pci-{bus}-card",
        "--link",
        f"../renderD128::/dev/dri/by-path/pci-{bus}-render",
    )
    # Another GPU (no drm directory for its PCI function) gets neither.
    (dev / "dev" / "nvidia1").touch()
    other = edits.device_edits(REF, devices(tmp_path)[1])
    assert [n.path for n in other.device_nodes] == ["/dev/nvidia1"]
    assert other.hooks == ()


def test_nvidia_ctk_as_hook_program_runs_its_hook_subcommand(
    tmp_path: Path, roots: tuple[Path, Path, Path]
) -> None:
    dev, driver, proc = roots
    edits = NvmlEdits(
        driver_root=driver, dev_root=dev, proc_root=proc, cdi_hook_path="/usr/bin/nvidia-ctk"
    )
    hooks = edits.claim_edits(REF, devices(tmp_path)[:1]).hooks
    assert all(h.args[:2] == ("nvidia-ctk", "hook") for h in hooks)


def test_hook_is_found_at_the_driver_root_and_named_by_its_host_path(
    tmp_path: Path, roots: tuple[Path, Path, Path]
) -> None:
    dev, driver, proc = roots
    hook = driver / "usr/local/nvidia/toolkit/nvidia-cdi-hook"
    hook.parent.mkdir(parents=True)
    hook.write_text("#!/bin/sh\n")
    hook.chmod(0o755)
    edits = NvmlEdits(
        driver_root=Path("/run/nvidia/driver"),
        container_driver_root=driver,
        dev_root=dev,
        proc_root=proc,
    )
    assert edits.hook_path() == "/run/nvidia/driver/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    assert edits.claim_edits(REF, devices(tmp_path)[:1]).hooks[0].path == edits.hook_path()


def test_without_a_hook_libraries_are_mounted_under_their_link_names(
    tmp_path: Path, roots: tuple[Path, Path, Path], caplog: pytest.LogCaptureFixture
) -> None:
    dev, driver, proc = roots
    edits = NvmlEdits(driver_root=driver, dev_root=dev, proc_root=proc)
    with caplog.at_level(logging.WARNING):
        common = edits.claim_edits(REF, devices(tmp_path)[:1])
    assert common.hooks == ()
    mounts = {m.container_path: m.host_path for m in common.mounts}
    real = str(driver / LIB / f"libcuda.so.{VERSION}")
    assert mounts[f"/{LIB}/libcuda.so.1"] == real
    assert mounts[f"/{LIB}/libcuda.so"] == real
    assert mounts[f"/{LIB}/libnvidia-ml.so.1"] == str(driver / LIB / f"libnvidia-ml.so.{VERSION}")
    assert any(getattr(r, "event", "") == "cdi_hook_missing" for r in caplog.records)


def test_libraries_in_lib64_are_found_gke_style(tmp_path: Path) -> None:
    driver = tmp_path / "nvidia"
    _write_driver(driver, lib_dir="lib64")
    (tmp_path / "dev").mkdir()
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        (tmp_path / "dev" / name).touch()
    edits = NvmlEdits(driver_root=driver, dev_root=tmp_path, cdi_hook_path=HOOK)
    common = edits.claim_edits(REF, [])
    paths = {m.container_path for m in common.mounts}
    assert f"/lib64/libcuda.so.{VERSION}" in paths
    assert "NVIDIA_CTK_LIBCUDA_DIR=/lib64" in common.env


def test_mounts_follow_a_driver_upgrade(tmp_path: Path, roots: tuple[Path, Path, Path]) -> None:
    dev, driver, proc = roots
    edits = NvmlEdits(driver_root=driver, dev_root=dev, proc_root=proc, cdi_hook_path=HOOK)
    before = edits.claim_edits(REF, [])
    assert f"/{LIB}/libcuda.so.{VERSION}" in {m.container_path for m in before.mounts}
    for old in (driver / LIB).iterdir():
        old.unlink()
    _write_driver(driver, version="580.65.06")
    after = edits.claim_edits(REF, [])
    paths = {m.container_path for m in after.mounts}
    assert f"/{LIB}/libcuda.so.580.65.06" in paths
    assert not any(VERSION in p for p in paths)
    assert "--host-driver-version=580.65.06" in after.hooks[1].args


def test_no_driver_below_the_root_fails_the_prepare(
    tmp_path: Path, roots: tuple[Path, Path, Path]
) -> None:
    dev, _, proc = roots
    edits = NvmlEdits(driver_root=tmp_path / "empty", dev_root=dev, proc_root=proc)
    with pytest.raises(DeviceNodeMissingError, match=r"libcuda\.so\.<version>"):
        edits.claim_edits(REF, [])


def test_missing_device_node_fails_the_prepare_instead_of_writing_a_partial_spec(
    tmp_path: Path, roots: tuple[Path, Path, Path]
) -> None:
    dev, driver, proc = roots
    (dev / "dev" / "nvidia1").unlink()
    edits = NvmlEdits(driver_root=driver, dev_root=dev, proc_root=proc)
    with pytest.raises(DeviceNodeMissingError, match="nvidia1"):
        edits.device_edits(REF, devices(tmp_path)[1])
    (dev / "dev" / "nvidiactl").unlink()
    with pytest.raises(DeviceNodeMissingError, match="nvidiactl"):
        edits.claim_edits(REF, devices(tmp_path)[:1])


def test_uvm_nodes_missing_with_module_unloaded_fail_the_prepare_naming_them(
    tmp_path: Path, roots: tuple[Path, Path, Path]
) -> None:
    # NVIDIA #1380: the spec silently lacked /dev/nvidia-uvm when it did not exist yet.
    dev, driver, proc = roots
    (dev / "dev" / "nvidia-uvm").unlink()
    (proc / "devices").write_text("Character devices:\n195 nvidia\n")
    edits = NvmlEdits(driver_root=driver, dev_root=dev, proc_root=proc, cdi_hook_path=HOOK)
    with pytest.raises(DeviceNodeMissingError, match=r"/dev/nvidia-uvm .*nvidia-uvm loaded"):
        edits.claim_edits(REF, devices(tmp_path)[:1])


@needs_root
def test_uvm_nodes_missing_are_created_from_proc_devices(
    tmp_path: Path, roots: tuple[Path, Path, Path]
) -> None:
    dev, driver, proc = roots
    (dev / "dev" / "nvidia-uvm").unlink()
    (dev / "dev" / "nvidia-uvm-tools").unlink()
    edits = NvmlEdits(driver_root=driver, dev_root=dev, proc_root=proc, cdi_hook_path=HOOK)
    common = edits.claim_edits(REF, devices(tmp_path)[:1])
    assert "/dev/nvidia-uvm" in [n.path for n in common.device_nodes]
    for name, minor in (("nvidia-uvm", 0), ("nvidia-uvm-tools", 1)):
        info = (dev / "dev" / name).stat()
        assert stat.S_ISCHR(info.st_mode)
        assert (os.major(info.st_rdev), os.minor(info.st_rdev)) == (510, minor)
        assert stat.S_IMODE(info.st_mode) == 0o666


def _mig(tmp_path: Path) -> tuple[NodeDevice, int, int]:
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
    return device, mig.gi_id, mig.ci_id


def _mig_proc(tmp_path: Path, gi: int, ci: int) -> Path:
    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia-caps").mkdir(parents=True)
    (proc / "devices").write_text(PROC_DEVICES)
    (proc / "driver" / "nvidia-caps" / "mig-minors").write_text(
        f"config 1\nmonitor 2\ngpu0/gi{gi}/access 21\n"
        f"gpu0/gi{gi}/ci{ci}/access 22\ngpu0/gi9/access 99\n"
    )
    return proc


def test_mig_device_gets_parent_node_and_capability_nodes(tmp_path: Path) -> None:
    device, gi, ci = _mig(tmp_path)
    dev = tmp_path / "host"
    (dev / "dev" / "nvidia-caps").mkdir(parents=True)
    for name in ("nvidia0", "nvidia-caps/nvidia-cap21", "nvidia-caps/nvidia-cap22"):
        (dev / "dev" / name).touch()
    edits = NvmlEdits(driver_root=tmp_path, dev_root=dev, proc_root=_mig_proc(tmp_path, gi, ci))
    nodes = [n.path for n in edits.device_edits(REF, device).device_nodes]
    assert nodes == [
        "/dev/nvidia0",
        "/dev/nvidia-caps/nvidia-cap21",
        "/dev/nvidia-caps/nvidia-cap22",
    ]


@needs_root
def test_mig_device_gets_drm_nodes_only_with_a_gfx_profile(tmp_path: Path) -> None:
    device, gi, ci = _mig(tmp_path)
    dev, sys_root = _drm_host(tmp_path, device.gpu.pci_bus_id)
    (dev / "dev" / "nvidia-caps").mkdir()
    for name in ("nvidia-cap21", "nvidia-cap22"):
        (dev / "dev" / "nvidia-caps" / name).touch()
    edits = NvmlEdits(
        driver_root=tmp_path,
        dev_root=dev,
        proc_root=_mig_proc(tmp_path, gi, ci),
        sys_root=sys_root,
        cdi_hook_path=HOOK,
    )
    plain = edits.device_edits(REF, device)
    assert not any("/dri/" in n.path for n in plain.device_nodes)
    assert plain.hooks == ()
    assert device.mig is not None
    gfx = dataclasses.replace(
        device, mig=dataclasses.replace(device.mig, profile_name=device.mig.profile_name + "+gfx")
    )
    with_gfx = edits.device_edits(REF, gfx)
    assert [n.path for n in with_gfx.device_nodes][3:] == ["/dev/dri/card1", "/dev/dri/renderD128"]
    assert len(with_gfx.hooks) == 1


def test_mig_capabilities_unreadable_fail_the_prepare(tmp_path: Path) -> None:
    # NVIDIA #787: a read error gave a MIG device without its capability nodes.
    device, _, _ = _mig(tmp_path)
    dev = tmp_path / "host"
    (dev / "dev").mkdir(parents=True)
    (dev / "dev" / "nvidia0").touch()
    edits = NvmlEdits(driver_root=tmp_path, dev_root=dev, proc_root=tmp_path / "noproc")
    with pytest.raises(DeviceNodeMissingError, match="mig-minors"):
        edits.device_edits(REF, device)
    proc = _mig_proc(tmp_path, 99, 99)
    edits = NvmlEdits(driver_root=tmp_path, dev_root=dev, proc_root=proc)
    with pytest.raises(DeviceNodeMissingError, match=r"gpu0/gi\d+/access .*not listed"):
        edits.device_edits(REF, device)


@needs_root
def test_mig_capability_nodes_missing_are_created(tmp_path: Path) -> None:
    device, gi, ci = _mig(tmp_path)
    dev = tmp_path / "host"
    (dev / "dev").mkdir(parents=True)
    (dev / "dev" / "nvidia0").touch()
    edits = NvmlEdits(driver_root=tmp_path, dev_root=dev, proc_root=_mig_proc(tmp_path, gi, ci))
    edits.device_edits(REF, device)
    info = (dev / "dev" / "nvidia-caps" / "nvidia-cap22").stat()
    assert (os.major(info.st_rdev), os.minor(info.st_rdev)) == (237, 22)


def test_gke_layout_mounts_the_firmware_named_by_the_kernels_firmware_class_path(
    tmp_path: Path,
) -> None:
    # As on a GKE node (and the H200 the gpu-check ran on): the driver below
    # /usr/local/nvidia, registered with ldconfig, its GSP firmware where firmware_class.path
    # points.
    driver = tmp_path / "root"
    lib = driver / "usr/local/nvidia/lib64"
    write_library(lib, f"libcuda.so.{VERSION}", "libcuda.so.1", "libcuda.so.1")
    (driver / "etc").mkdir(parents=True)
    (driver / "etc/ld.so.cache").write_bytes(
        ld_cache([("libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1")])
    )
    firmware = driver / "usr/local/nvidia/firmware/nvidia" / VERSION
    firmware.mkdir(parents=True)
    (firmware / "gsp_ga10x.bin").write_bytes(b"\0")
    sys_root = tmp_path / "sys"
    param = sys_root / "module/firmware_class/parameters/path"
    param.parent.mkdir(parents=True)
    param.write_text("/usr/local/nvidia/firmware\n")
    dev = tmp_path / "dev"
    (dev / "dev").mkdir(parents=True)
    for name in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        (dev / "dev" / name).touch()
    with_param = NvmlEdits(driver_root=driver, dev_root=dev, sys_root=sys_root)
    paths = {m.container_path for m in with_param.claim_edits(REF, []).mounts}
    assert f"/usr/local/nvidia/lib64/libcuda.so.{VERSION}" in paths
    assert f"/usr/local/nvidia/firmware/nvidia/{VERSION}/gsp_ga10x.bin" in paths
    without = NvmlEdits(driver_root=driver, dev_root=dev, sys_root=tmp_path / "no-sys")
    paths = {m.container_path for m in without.claim_edits(REF, []).mounts}
    assert not any("gsp_" in path for path in paths)
