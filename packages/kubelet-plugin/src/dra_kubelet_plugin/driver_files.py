"""What an installed NVIDIA driver offers a container: its files below the driver root.

:func:`scan_driver_root` looks files up the way nvidia-container-toolkit's ``nvcdi`` does, so
the CDI spec of a claim holds what ``nvidia-ctk cdi generate`` would put in it:

- the driver version and library directory from the first ``libcuda.so.<version>`` (else
  ``libnvidia-ml.so.<version>``) found in the toolkit's search dirs (``/usr/lib64``, the
  multiarch dirs and their ``nvidia/current``, ``/lib64``, ...), then through the root's
  ``/etc/ld.so.cache`` (drivers registered with ``ldconfig`` elsewhere, such as GKE's
  ``/usr/local/nvidia/lib64``), then in ``/usr/lib`` and ``/lib``;
- every ``*.so.<version>`` of that directory and of its ``vdpau/`` (symlinks resolved), each
  with its ELF ``SONAME`` and whether the SONAME and ``.so`` links exist next to it; the
  EGL platform libraries (``libnvidia-egl-gbm``, ``-wayland``, ``-wayland2``);
- the GSP firmware ``nvidia/<version>/gsp*.bin`` below the firmware dirs;
- the tools (``nvidia-smi``, MPS, IMEX, ...) from the ``bin`` beside the library directory
  (``/usr/local/nvidia/bin`` next to ``.../lib64``: the tools of the same installation, where
  ``/usr/bin`` may hold only wrapper scripts, as the CUDA images' ``PATH`` has it), then from
  the executable dirs;
- the IPC sockets (persistenced, fabric manager);
- the graphics configs (glvnd, EGL platforms, Vulkan ICD);
- the Xorg driver module ``nvidia_drv.so`` and GLX server extension
  ``libglxserver_nvidia.so.<version>``: the first of each in the Xorg module dirs (the
  library directory's ``nvidia/xorg`` and ``xorg/modules``, then ``/usr/lib/xorg``,
  ``/usr/lib64/xorg``, ``/usr/X11R6/lib``, ``/usr/X11R6/lib64``).

Paths are "container paths": absolute paths below the root (``/usr/lib/...``), the form the
spec's ``containerPath`` takes; the host path is the host's driver root joined with it.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dra_nvlib.errors import LibraryLoadError
from dra_nvlib.nvml_binding import LIBRARY_NAME, find_library

from dra_kubelet_plugin.elf_soname import ElfError, soname_of_file
from dra_kubelet_plugin.ld_cache import LdCacheError, parse_ld_cache

__all__ = [
    "LIBRARY_SEARCH_DIRS",
    "DriverFiles",
    "DriverLibrary",
    "DriverNotFoundError",
    "driver_tool",
    "driver_version_at",
    "nvml_library_at",
    "scan_driver_root",
]

#: nvcdi's library search dirs; the last two are searched after the root's ``ld.so.cache``.
LIBRARY_SEARCH_DIRS = (
    "/",
    "/usr/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu/nvidia/current",
    "/usr/lib/aarch64-linux-gnu/nvidia/current",
    "/lib64",
    "/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/lib/x86_64-linux-gnu/nvidia/current",
    "/lib/aarch64-linux-gnu/nvidia/current",
    "/usr/lib",
    "/lib",
)
#: The dynamic loader's cache, below the driver root.
LD_CACHE = "/etc/ld.so.cache"
_EXECUTABLE_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
_BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
    "nvidia-imex",
    "nvidia-imex-ctl",
)
_EGL_PLATFORM_LIBRARIES = (
    "libnvidia-egl-gbm.so.*.*",
    "libnvidia-egl-wayland.so.*.*",
    "libnvidia-egl-wayland2.so.*.*",
)
_SOCKETS = ("nvidia-persistenced/socket", "nvidia-fabricmanager/socket")
_CONFIG_DIRS = ("/etc", "/usr/local/share", "/usr/share")
_GRAPHICS_CONFIGS = (
    "glvnd/egl_vendor.d/10_nvidia.json",
    "egl/egl_external_platform.d/15_nvidia_gbm.json",
    "egl/egl_external_platform.d/10_nvidia_wayland.json",
    "egl/egl_external_platform.d/09_nvidia_wayland2.json",
    "nvidia/nvoptix.bin",
    "X11/xorg.conf.d/10-nvidia.conf",
    "X11/xorg.conf.d/nvidia-drm-outputclass.conf",
)
_VULKAN_CONFIGS = (
    "vulkan/icd.d/nvidia_icd.json",
    "vulkan/icd.d/nvidia_layers.json",
    "vulkan/implicit_layer.d/nvidia_layers.json",
    {"aarch64": "vulkan/icd.d/nvidia_icd.aarch64.json"}.get(
        platform.machine(), "vulkan/icd.d/nvidia_icd.x86_64.json"
    ),
)


_XORG_MODULE_DIRS = (
    "modules/drivers",
    "modules/extensions",
    "modules/updates/drivers",
    "modules/updates/extensions",
)
_XORG_ROOTS = ("/usr/lib/xorg", "/usr/lib64/xorg", "/usr/X11R6/lib", "/usr/X11R6/lib64")


def xorg_search_dirs(lib_dir: str) -> list[str]:
    """Where the Xorg modules are looked for, in order, for a driver in ``lib_dir``."""
    dirs = [f"{lib_dir}/nvidia/xorg", *(f"{lib_dir}/xorg/{d}" for d in _XORG_MODULE_DIRS)]
    return dirs + [f"{root}/{d}" for root in _XORG_ROOTS for d in _XORG_MODULE_DIRS]


class DriverNotFoundError(RuntimeError):
    """No ``libcuda.so.<version>`` nor ``libnvidia-ml.so.<version>`` below the driver root."""

    def __init__(self, root: Path) -> None:
        super().__init__(
            f"no libcuda.so.<version> or libnvidia-ml.so.<version> below driver root {root} "
            f"(searched {', '.join(LIBRARY_SEARCH_DIRS)} and {LD_CACHE}); "
            "is --nvidia-driver-root right?"
        )
        self.root = root


@dataclass(frozen=True)
class DriverLibrary:
    """One library file of the driver and the links the installer made to it."""

    path: str
    soname: str
    soname_link: bool
    so_link: bool


@dataclass(frozen=True)
class DriverFiles:
    """The files of one driver installation (container paths; see the module docstring)."""

    version: str
    lib_dir: str
    libraries: tuple[DriverLibrary, ...]
    egl_platform_libraries: tuple[DriverLibrary, ...] = ()
    firmware: tuple[str, ...] = ()
    binaries: tuple[str, ...] = ()
    sockets: tuple[str, ...] = ()
    graphics_configs: tuple[str, ...] = ()
    # (found at, mounted at): Vulkan configs go to /etc wherever they are found.
    vulkan_configs: tuple[tuple[str, str], ...] = ()
    # nvidia_drv.so and libglxserver_nvidia.so.<version>, where found.
    xorg_libraries: tuple[str, ...] = ()


def _under(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def _container_path(root: Path, found: Path) -> str:
    return "/" + str(found.relative_to(root))


def _resolve_below(root: Path, found: Path) -> Path | None:
    """``found`` with symlinks resolved, if it stays below ``root`` and is a regular file."""
    try:
        real = found.resolve(strict=True)
        real.relative_to(root.resolve())
    except (OSError, ValueError):
        return None
    return real if real.is_file() else None


def _cached_paths(root: Path, soname: str) -> list[Path]:
    """Where the root's ``ld.so.cache`` resolves ``soname`` (none without a readable cache:
    the directory search still applies)."""
    try:
        entries = parse_ld_cache(_under(root, LD_CACHE).read_bytes())
    except (OSError, LdCacheError):
        return []
    return [_under(root, entry.path) for entry in entries if entry.soname == soname]


def _candidates(root: Path, prefix: str) -> Iterable[Path]:
    """``prefix*.*`` in the search dirs, the cache's ``prefix1``, then ``/usr/lib`` and ``/lib``."""
    for directory in LIBRARY_SEARCH_DIRS[:-2]:
        yield from sorted(_under(root, directory).glob(prefix + "*.*"))
    yield from _cached_paths(root, prefix + "1")
    for directory in LIBRARY_SEARCH_DIRS[-2:]:
        yield from sorted(_under(root, directory).glob(prefix + "*.*"))


def _locate_driver_library(root: Path) -> tuple[Path, str]:
    for prefix in ("libcuda.so.", "libnvidia-ml.so."):
        for found in _candidates(root, prefix):
            real = _resolve_below(root, found)
            # The versioned file: a cached ``libcuda.so.1`` is a link to it.
            if real is not None and real.name.startswith(prefix) and real.name != prefix + "1":
                return real, real.name.removeprefix(prefix)
    raise DriverNotFoundError(root)


def nvml_library_at(root: Path) -> Path | None:
    """``libnvidia-ml.so.1`` below ``root``: in the toolkit's library directories (NVML's own
    search), else where the root's ``ld.so.cache`` puts it (a driver registered with ldconfig
    elsewhere, as GKE-style hosts keep it in ``/usr/local/nvidia/lib64``); None for neither."""
    try:
        return find_library(root)
    except LibraryLoadError:
        pass
    for path in _cached_paths(root, LIBRARY_NAME):
        if _resolve_below(root, path) is not None:
            return path
    return None


def driver_version_at(root: Path) -> str:
    """The version of the driver below ``root`` (``DriverNotFoundError`` when none)."""
    return _locate_driver_library(root)[1]


def _library(root: Path, real: Path) -> DriverLibrary:
    try:
        soname = soname_of_file(real) or real.name
    except (OSError, ElfError):
        # What nvcdi does with a library it cannot read: no SONAME links for it.
        soname = real.name
    so_link = soname
    while Path(so_link).suffix not in ("", ".so"):
        so_link = so_link[: -len(Path(so_link).suffix)]
    return DriverLibrary(
        path=_container_path(root, real),
        soname=soname,
        soname_link=soname != real.name and (real.parent / soname).is_symlink(),
        so_link=so_link.endswith(".so")
        and so_link != soname
        and (real.parent / so_link).is_symlink(),
    )


def _libraries(root: Path, dirs: Iterable[Path], patterns: Iterable[str]) -> list[DriverLibrary]:
    seen: dict[Path, DriverLibrary] = {}
    for directory in dirs:
        for pattern in patterns:
            for found in sorted(directory.glob(pattern)):
                real = _resolve_below(root, found)
                if real is not None and real not in seen:
                    seen[real] = _library(root, real)
    return list(seen.values())


def _first(root: Path, dirs: Iterable[str], name: str) -> Path | None:
    for directory in dirs:
        candidate = _under(root, directory) / name
        if candidate.exists():
            return candidate
    return None


def _executable_dirs(container_lib_dir: str) -> tuple[str, ...]:
    """The ``bin`` beside the driver's libraries (the same installation's tools), then the
    usual executable dirs."""
    return (str(Path(container_lib_dir).parent / "bin"), *_EXECUTABLE_DIRS)


def driver_tool(root: Path, name: str) -> Path:
    """Where this process finds the driver's tool ``name`` below ``root``: beside its libraries,
    else in the executable dirs; ``<root>/usr/bin/<name>`` when neither has it (or no driver is
    installed yet), so the error of running it names the expected place."""
    root = root.resolve()
    try:
        lib_dir = _container_path(root, _locate_driver_library(root)[0].parent)
        dirs = _executable_dirs(lib_dir)
    except DriverNotFoundError:
        dirs = _EXECUTABLE_DIRS
    found = _first(root, dirs, name)
    return found if found is not None else _under(root, "/usr/bin") / name


def _firmware_dirs(kernel_release: str, custom: str | None) -> list[str]:
    dirs = [custom] if custom else []
    return [
        *dirs,
        f"/lib/firmware/updates/{kernel_release}",
        "/lib/firmware/updates",
        f"/lib/firmware/{kernel_release}",
        "/lib/firmware",
    ]


def scan_driver_root(
    root: Path,
    *,
    kernel_release: str | None = None,
    custom_firmware_dir: str | None = None,
) -> DriverFiles:
    """Find the driver's files below ``root`` (where this process sees the driver root).

    ``kernel_release`` (default: this kernel's) and ``custom_firmware_dir`` (the kernel's
    ``firmware_class.path``) name the firmware dirs the kernel loads from.
    """
    root = root.resolve()
    libcuda, version = _locate_driver_library(root)
    lib_dir = libcuda.parent
    libraries = _libraries(root, (lib_dir, lib_dir / "vdpau"), (f"*.so.{version}",))
    egl = [
        lib
        for lib in _libraries(
            root, (_under(root, d) for d in LIBRARY_SEARCH_DIRS), _EGL_PLATFORM_LIBRARIES
        )
        if lib not in libraries
    ]
    firmware: list[str] = []
    release = kernel_release if kernel_release is not None else os.uname().release
    for directory in _firmware_dirs(release, custom_firmware_dir):
        for blob in sorted((_under(root, directory) / "nvidia" / version).glob("gsp*.bin")):
            path = _container_path(root, blob)
            if blob.is_file() and path not in firmware:
                firmware.append(path)
    container_lib_dir = _container_path(root, lib_dir)
    executable_dirs = _executable_dirs(container_lib_dir)
    binaries = [
        _container_path(root, found)
        for name in _BINARIES
        if (found := _first(root, executable_dirs, name)) is not None and os.access(found, os.X_OK)
    ]
    sockets = [
        _container_path(root, found)
        for name in _SOCKETS
        if (found := _first(root, ("/run", "/var/run"), name)) is not None
    ]
    configs = [
        _container_path(root, found)
        for name in _GRAPHICS_CONFIGS
        if (found := _first(root, _CONFIG_DIRS, name)) is not None
    ]
    vulkan = [
        (_container_path(root, found), f"/etc/{name}")
        for name in _VULKAN_CONFIGS
        if (found := _first(root, _CONFIG_DIRS, name)) is not None
    ]
    xorg = [
        _container_path(root, found)
        for name in ("nvidia_drv.so", f"libglxserver_nvidia.so.{version}")
        if (found := _first(root, xorg_search_dirs(container_lib_dir), name)) is not None
        and found.is_file()
    ]
    return DriverFiles(
        version=version,
        lib_dir=container_lib_dir,
        libraries=tuple(libraries),
        egl_platform_libraries=tuple(egl),
        firmware=tuple(firmware),
        binaries=tuple(binaries),
        sockets=tuple(sockets),
        graphics_configs=tuple(configs),
        vulkan_configs=tuple(vulkan),
        xorg_libraries=tuple(xorg),
    )
