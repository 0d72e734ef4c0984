"""A synthetic NVIDIA driver root: stand-in files with the real names, versions and SONAMEs.

Every library is a real (tiny) ELF shared object built with the C compiler, with the SONAME
the real driver's library has, and the installer's links next to it, so both
``nvidia-ctk cdi generate`` and our scanner read SONAMEs from the files and ``ldconfig`` in a
container accepts them. ``libnvidia-ml`` is the go-nvml mock library
(``dra_nvlib.mock_nvml_build``), so ``nvidia-ctk`` meets NVIDIA's mock GPUs through it.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: The driver version the go-nvml mock systems report (dgxa100).
MOCK_DRIVER_VERSION = "550.54.15"

# (library, SONAME suffix): "" means the SONAME is the versioned file name itself.
_LIBRARIES = (
    ("libcuda", "1"),
    ("libcudadebugger", "1"),
    ("libnvidia-ptxjitcompiler", "1"),
    ("libnvidia-nvvm", "4"),
    ("libnvidia-gpucomp", ""),
    ("libnvidia-allocator", "1"),
    ("libnvidia-cfg", "1"),
    ("libnvidia-opencl", "1"),
    ("libnvidia-encode", "1"),
    ("libnvcuvid", "1"),
    ("libnvidia-opticalflow", "1"),
    ("libnvidia-fbc", "1"),
    ("libnvoptix", "1"),
    ("libnvidia-rtcore", ""),
    ("libnvidia-eglcore", ""),
    ("libnvidia-glcore", ""),
    ("libnvidia-glsi", ""),
    ("libnvidia-tls", ""),
    ("libnvidia-glvkspirv", ""),
    ("libEGL_nvidia", "0"),
    ("libGLX_nvidia", "0"),
    ("libGLESv2_nvidia", "2"),
    ("libGLESv1_CM_nvidia", "1"),
    ("libnvidia-pkcs11-openssl3", ""),
)
# Links a driver's installer adds besides the SONAME ones.
_DEV_LINKS = ("libcuda.so", "libnvidia-opticalflow.so", "libnvidia-encode.so")
_EGL_PLATFORM = (("libnvidia-egl-gbm", "1.1.2", "1"), ("libnvidia-egl-wayland", "1.1.13", "1"))
_BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
    "nvidia-imex",
    "nvidia-imex-ctl",
)
_CONFIGS = (
    "usr/share/glvnd/egl_vendor.d/10_nvidia.json",
    "usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json",
    "usr/share/egl/egl_external_platform.d/10_nvidia_wayland.json",
    "usr/share/nvidia/nvoptix.bin",
    "etc/vulkan/icd.d/nvidia_icd.json",
    "usr/share/vulkan/implicit_layer.d/nvidia_layers.json",
)
#: Where each layout keeps the libraries and the tools.
LAYOUTS = {
    "debian": ("usr/lib/x86_64-linux-gnu", "usr/bin"),
    "rhel": ("usr/lib64", "usr/bin"),
    "gke": ("lib64", "bin"),
}


@dataclass(frozen=True)
class DriverRoot:
    """A synthetic driver root (which is its own ``/dev`` root too)."""

    root: Path
    lib_dir: str
    version: str

    @property
    def lib_path(self) -> Path:
        """The library directory on this machine."""
        return self.root / self.lib_dir


def _shared_object(path: Path, soname: str, cc: str, build: Path) -> None:
    source = build / "stub.c"
    if not source.exists():
        source.write_text("int dra_stand_in(void) { return 0; }\n")
    subprocess.run(
        [
            cc,
            "-shared",
            "-fPIC",
            "-nostdlib",
            f"-Wl,-soname,{soname}",
            "-o",
            str(path),
            str(source),
        ],
        check=True,
        capture_output=True,
    )


def _char_device(path: Path, major: int, minor: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))


def make_driver_root(
    root: Path,
    *,
    nvml_library: Path,
    layout: str = "debian",
    version: str = MOCK_DRIVER_VERSION,
    gpus: int = 8,
) -> DriverRoot:
    """Lay out a driver installation below ``root`` (needs root for ``mknod`` and a C compiler).

    ``gpus``: how many ``/dev/nvidiaN`` nodes (the mock systems have 8 GPUs).
    """
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("a C compiler (cc) is needed to build the stand-in libraries")
    lib_dir, bin_dir = LAYOUTS[layout]
    lib = root / lib_dir
    (lib / "vdpau").mkdir(parents=True)
    build = root.parent / f"{root.name}.build"
    build.mkdir(exist_ok=True)
    for name, suffix in _LIBRARIES:
        real = f"{name}.so.{version}"
        soname = f"{name}.so.{suffix}" if suffix else real
        _shared_object(lib / real, soname, cc, build)
        if soname != real:
            (lib / soname).symlink_to(real)
    for link in _DEV_LINKS:
        target = next(p.name for p in lib.glob(link + ".?"))
        (lib / link).symlink_to(target)
    shutil.copyfile(nvml_library, lib / f"libnvidia-ml.so.{version}")
    (lib / "libnvidia-ml.so.1").symlink_to(f"libnvidia-ml.so.{version}")
    _shared_object(
        lib / "vdpau" / f"libvdpau_nvidia.so.{version}", "libvdpau_nvidia.so.1", cc, build
    )
    (lib / "vdpau" / "libvdpau_nvidia.so.1").symlink_to(f"libvdpau_nvidia.so.{version}")
    for name, own_version, suffix in _EGL_PLATFORM:
        _shared_object(lib / f"{name}.so.{own_version}", f"{name}.so.{suffix}", cc, build)
        (lib / f"{name}.so.{suffix}").symlink_to(f"{name}.so.{own_version}")
    if layout == "debian":
        # 32-bit compatibility libraries: not for 64-bit containers, never in the spec.
        lib32 = root / "usr/lib/i386-linux-gnu"
        lib32.mkdir(parents=True)
        _shared_object(lib32 / f"libcuda.so.{version}", "libcuda.so.1", cc, build)
    (root / bin_dir).mkdir(parents=True, exist_ok=True)
    for tool in _BINARIES:
        (root / bin_dir / tool).write_text("#!/bin/sh\n")
        (root / bin_dir / tool).chmod(0o755)
    for config in _CONFIGS:
        (root / config).parent.mkdir(parents=True, exist_ok=True)
        (root / config).write_text("{}\n")
    firmware = root / "lib/firmware/nvidia" / version
    firmware.mkdir(parents=True)
    for blob in ("gsp_ga10x.bin", "gsp_tu10x.bin"):
        (firmware / blob).write_bytes(b"\0")
    for ipc in ("run/nvidia-persistenced/socket", "run/nvidia-fabricmanager/socket"):
        (root / ipc).parent.mkdir(parents=True)
        _socket_file(root / ipc)
    (root / "tmp/nvidia-mps").mkdir(parents=True)
    dev = root / "dev"
    for minor in range(gpus):
        _char_device(dev / f"nvidia{minor}", 195, minor)
    _char_device(dev / "nvidiactl", 195, 255)
    _char_device(dev / "nvidia-modeset", 195, 254)
    _char_device(dev / "nvidia-uvm", 510, 0)
    _char_device(dev / "nvidia-uvm-tools", 510, 1)
    return DriverRoot(root=root, lib_dir=lib_dir, version=version)


#: Where each layout's packages put the Xorg modules (below the library dir for GKE's).
_XORG_DIRS = {
    "debian": "usr/lib/xorg/modules",
    "rhel": "usr/lib64/xorg/modules",
    "gke": "lib64/xorg/modules",
}
_DRM_MAJOR = 226
# The X11 and newer EGL/Vulkan configs a desktop driver install adds (RPM-style ICD name too).
_GRAPHICS_ONLY_CONFIGS = (
    "usr/share/X11/xorg.conf.d/10-nvidia.conf",
    "etc/X11/xorg.conf.d/nvidia-drm-outputclass.conf",
    "usr/share/egl/egl_external_platform.d/09_nvidia_wayland2.json",
    "usr/share/vulkan/icd.d/nvidia_icd.x86_64.json",
)


def add_graphics(driver: DriverRoot, *, layout: str, pci_bus_ids: Sequence[str]) -> Path:
    """Add what a desktop-capable node has: the Xorg modules and configs, the Vulkan producer
    and EGL Wayland 2 libraries, the GPUs' DRM nodes and udev's
    ``/dev/dri/by-path`` links, and the sysfs ``drm`` directories that tie each node to its
    GPU's PCI function. Returns the synthetic ``/sys`` (mount its ``bus/pci/devices`` over
    the host's for ``nvidia-ctk``, which reads the absolute path).

    GPU ``i`` gets ``card<i+1>`` and ``renderD<128+i>``, except: the second-to-last GPU's
    ``card`` node is listed in sysfs but missing from ``/dev`` (its by-path link dangles),
    the third-to-last GPU's render link points at another GPU's node, and the last GPU has
    no ``drm`` directory at all (``nvidia-drm`` not bound).
    """
    for config in _GRAPHICS_ONLY_CONFIGS:
        (driver.root / config).parent.mkdir(parents=True, exist_ok=True)
        (driver.root / config).write_text("{}\n")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise RuntimeError("a C compiler (cc) is needed to build the stand-in libraries")
    build = driver.root.parent / f"{driver.root.name}.build"
    producer = f"libnvidia-vulkan-producer.so.{driver.version}"
    _shared_object(driver.lib_path / producer, producer, cc, build)
    _shared_object(
        driver.lib_path / "libnvidia-egl-wayland2.so.1.0.0",
        "libnvidia-egl-wayland2.so.1",
        cc,
        build,
    )
    (driver.lib_path / "libnvidia-egl-wayland2.so.1").symlink_to("libnvidia-egl-wayland2.so.1.0.0")
    xorg = driver.root / _XORG_DIRS[layout]
    (xorg / "drivers").mkdir(parents=True)
    (xorg / "extensions").mkdir(parents=True)
    (xorg / "drivers" / "nvidia_drv.so").write_bytes(b"\0")
    (xorg / "extensions" / f"libglxserver_nvidia.so.{driver.version}").write_bytes(b"\0")
    sys_root = driver.root.parent / f"{driver.root.name}.sys"
    dri = driver.root / "dev" / "dri"
    (dri / "by-path").mkdir(parents=True)
    last = len(pci_bus_ids) - 1
    for index, bus in enumerate(pci_bus_ids):
        if index == last:
            continue
        card, render = f"card{index + 1}", f"renderD{128 + index}"
        drm = sys_root / "bus" / "pci" / "devices" / bus / "drm"
        for name in (card, render):
            (drm / name).mkdir(parents=True)
        if index != last - 1:
            _char_device(dri / card, _DRM_MAJOR, index + 1)
        _char_device(dri / render, _DRM_MAJOR, 128 + index)
        render_target = "../renderD128" if index == last - 2 else f"../{render}"
        (dri / "by-path" / f"pci-{bus}-card").symlink_to(f"../{card}")
        (dri / "by-path" / f"pci-{bus}-render").symlink_to(render_target)
    return sys_root


_NVIDIA_CAPS_MAJOR = 237


def add_mig_capabilities(driver: DriverRoot, proc_driver: Path, *, gpus: int = 2) -> None:
    """The MIG access capabilities of ``gpus`` GPUs, as the driver lists them: every
    ``gpu<N>/gi<M>/access`` and ``gpu<N>/gi<M>/ci<K>/access`` (8 GPU and 8 compute instance
    ids) in ``<proc_driver>/nvidia-caps/mig-minors``, each with its
    ``/dev/nvidia-caps/nvidia-cap<minor>`` node below the driver root.

    ``proc_driver`` stands for ``/proc/driver`` (bind it there for ``nvidia-ctk``, which
    reads the absolute path; ours takes its parent as the proc root).
    """
    lines = ["config 1", "monitor 2"]
    minor = 2
    for gpu in range(gpus):
        for gi in range(8):
            for cap in (
                f"gpu{gpu}/gi{gi}/access",
                *(f"gpu{gpu}/gi{gi}/ci{ci}/access" for ci in range(8)),
            ):
                minor += 1
                lines.append(f"{cap} {minor}")
                _char_device(
                    driver.root / "dev" / "nvidia-caps" / f"nvidia-cap{minor}",
                    _NVIDIA_CAPS_MAJOR,
                    minor,
                )
    caps = proc_driver / "nvidia-caps"
    caps.mkdir(parents=True)
    (caps / "mig-minors").write_text("\n".join(lines) + "\n")


def _socket_file(path: Path) -> None:
    """A Unix socket file at ``path``, however long (the toolkit only looks for it).

    A socket address holds at most 107 bytes and a temporary directory under an xdist
    worker's base is longer, so the socket is bound in a short directory and moved.
    """
    with tempfile.TemporaryDirectory(prefix="cdi-") as short:
        bound = Path(short) / "s"
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(bound))
        os.replace(bound, path)
