"""The CDI edits of a driver installation, as nvidia-container-toolkit renders them (pure).

From :class:`~dra_kubelet_plugin.driver_files.DriverFiles` (found by
:func:`~dra_kubelet_plugin.driver_files.scan_driver_root`) this builds the claim-wide part of
a real GPU's spec, entry for entry what ``nvidia-ctk cdi generate`` (nvcdi, ``nvml`` mode)
writes for the same driver root:

- mounts: the libraries, EGL platform libraries, graphics and Vulkan configs, the Xorg
  modules (``nvidia_drv.so``, ``libglxserver_nvidia.so.<version>``), firmware and tools
  (``ro, nosuid, nodev, rbind, rprivate``), the IPC sockets
  (``nosuid, nodev, rbind, rprivate, noexec``), ordered by path depth, then path, as nvcdi;
- hooks run by ``nvidia-cdi-hook`` at ``createContainer``: ``create-symlinks`` (the graphics
  links: GBM backend, Vulkan producer, ``libglxserver_nvidia.so``), then each library's
  SONAME and ``.so`` links, ``libcuda.so``, ``libGLX_indirect.so.0``),
  ``enable-cuda-compat --host-driver-version``, ``update-ldcache --folder <each library dir>``,
  ``disable-device-node-modification``;
- env ``NVIDIA_CTK_LIBCUDA_DIR`` and ``NVIDIA_VISIBLE_DEVICES=void``.

Without a hook program (``hook_path`` ``None``) there is nobody to make links or update the
container's ``ld.so.cache``, so each library is also mounted under its SONAME and ``.so``
names: programs that ``dlopen("libcuda.so.1")`` from a standard library dir still find it.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable

from dra_kubelet_core.cdi import ContainerEdits, Hook, Mount

from dra_kubelet_plugin.driver_files import DriverFiles, DriverLibrary

__all__ = [
    "FILE_MOUNT_OPTIONS",
    "IPC_MOUNT_OPTIONS",
    "create_symlinks_hook",
    "driver_edits",
    "nvidia_cdi_hook",
]

FILE_MOUNT_OPTIONS = ("ro", "nosuid", "nodev", "rbind", "rprivate")
IPC_MOUNT_OPTIONS = ("nosuid", "nodev", "rbind", "rprivate", "noexec")
_HOOK_ENV = ("NVIDIA_CTK_DEBUG=false",)


def nvidia_cdi_hook(hook_path: str, name: str, *args: str) -> Hook:
    """A ``createContainer`` hook running ``nvidia-cdi-hook <name> <args>`` (``nvidia-ctk hook``
    when ``hook_path`` is an ``nvidia-ctk``)."""
    program = posixpath.basename(hook_path)
    fixed = (program, "hook") if program == "nvidia-ctk" else (program,)
    return Hook(path=hook_path, args=(*fixed, name, *args), env=_HOOK_ENV)


def create_symlinks_hook(hook_path: str, links: Iterable[str]) -> Hook:
    """``nvidia-cdi-hook create-symlinks --link <target::link> ...``."""
    return nvidia_cdi_hook(hook_path, "create-symlinks", *_link_args(links))


def _is_driver_library(file_name: str, library: str, version: str) -> bool:
    return fnmatch.fnmatchcase(file_name, f"{library}.{version}")


def _named_links(lib: DriverLibrary, version: str) -> list[str]:
    """The extra links nvcdi makes for a few libraries (``target::link``)."""
    directory, name = posixpath.split(lib.path)
    if _is_driver_library(name, "libcuda.so", version):
        return [f"libcuda.so.1::{directory}/libcuda.so"]
    if _is_driver_library(name, "libGLX_nvidia.so", version):
        return [f"{name}::{directory}/libGLX_indirect.so.0"]
    if _is_driver_library(name, "libnvidia-opticalflow.so", version):
        return [f"libnvidia-opticalflow.so.1::{directory}/libnvidia-opticalflow.so"]
    return []


def _so_link_name(soname: str) -> str:
    name = soname
    while posixpath.splitext(name)[1] not in ("", ".so"):
        name = posixpath.splitext(name)[0]
    return name


def _soname_links(lib: DriverLibrary) -> list[str]:
    directory, name = posixpath.split(lib.path)
    links = []
    if lib.soname_link:
        links.append(f"{name}::{directory}/{lib.soname}")
    if lib.so_link:
        links.append(f"{lib.soname}::{directory}/{_so_link_name(lib.soname)}")
    return links


def _graphics_links(files: DriverFiles) -> list[str]:
    links = []
    for lib in (*files.libraries, *files.egl_platform_libraries):
        directory, name = posixpath.split(lib.path)
        if _is_driver_library(name, "libnvidia-allocator.so", files.version):
            links.append(f"../libnvidia-allocator.so.1::{directory}/gbm/nvidia-drm_gbm.so")
        elif _is_driver_library(name, "libnvidia-vulkan-producer.so", files.version):
            links.append(f"{name}::{directory}/libnvidia-vulkan-producer.so")
    links += [f"{posixpath.basename(target)}::{link}" for target, link in _xorg_links(files)]
    return links


def _xorg_links(files: DriverFiles) -> list[tuple[str, str]]:
    """``(file, link)``: Xorg loads the GLX extension as ``libglxserver_nvidia.so``."""
    links = []
    for path in files.xorg_libraries:
        directory, name = posixpath.split(path)
        if _is_driver_library(name, "libglxserver_nvidia.so", files.version):
            links.append((path, f"{directory}/libglxserver_nvidia.so"))
    return links


def _library_links(files: DriverFiles) -> list[str]:
    links: list[str] = []
    for lib in files.libraries:
        for link in (*_named_links(lib, files.version), *_soname_links(lib)):
            if link not in links:
                links.append(link)
    return links


def _is_library_name(path: str) -> bool:
    base = posixpath.basename(path)
    if not fnmatch.fnmatchcase(base, "lib?*.so*"):
        return False
    tail = base.split(".so")[-1]
    return tail == "" or tail.startswith(".")


def _unique_dirs(paths: Iterable[str]) -> list[str]:
    dirs: list[str] = []
    for path in paths:
        directory = posixpath.dirname(path)
        if directory and directory not in dirs:
            dirs.append(directory)
    return dirs


def _link_mounts(files: DriverFiles, host: str) -> list[Mount]:
    """The library again under its link names, for a spec without hooks."""
    mounts = [
        Mount(host_path=host + target, container_path=link, options=FILE_MOUNT_OPTIONS)
        for target, link in _xorg_links(files)
    ]
    for lib in files.libraries:
        directory = posixpath.dirname(lib.path)
        names = []
        if lib.soname_link:
            names.append(lib.soname)
        if lib.so_link:
            names.append(_so_link_name(lib.soname))
        for link in _named_links(lib, files.version):
            names.append(posixpath.basename(link.split("::", 1)[1]))
        for name in dict.fromkeys(names):
            mounts.append(
                Mount(
                    host_path=host + lib.path,
                    container_path=f"{directory}/{name}",
                    options=FILE_MOUNT_OPTIONS,
                )
            )
    return mounts


def driver_edits(files: DriverFiles, *, host_root: str, hook_path: str | None) -> ContainerEdits:
    """The claim-wide edits for the driver ``files`` found below the host's ``host_root``.

    Args:
        files: what :func:`~dra_kubelet_plugin.driver_files.scan_driver_root` found.
        host_root: the driver root as the host (the container runtime) sees it.
        hook_path: host path of ``nvidia-cdi-hook``; ``None``: no hooks (see module doc).
    """
    host = host_root.rstrip("/")

    def file_mount(path: str, container_path: str | None = None) -> Mount:
        return Mount(
            host_path=host + path,
            container_path=container_path or path,
            options=FILE_MOUNT_OPTIONS,
        )

    mounts = [file_mount(lib.path) for lib in files.libraries]
    mounts += [file_mount(lib.path) for lib in files.egl_platform_libraries]
    mounts += [file_mount(path) for path in (*files.graphics_configs, *files.xorg_libraries)]
    mounts += [file_mount(found, at) for found, at in files.vulkan_configs]
    mounts += [
        Mount(host_path=host + path, container_path=path, options=IPC_MOUNT_OPTIONS)
        for path in files.sockets
    ]
    mounts += [file_mount(path) for path in (*files.firmware, *files.binaries)]
    hooks: list[Hook] = []
    if hook_path is None:
        mounts += _link_mounts(files, host)
    else:
        graphics = _graphics_links(files)
        if graphics:
            hooks.append(create_symlinks_hook(hook_path, graphics))
        links = _library_links(files)
        if links:
            hooks.append(create_symlinks_hook(hook_path, links))
        hooks.append(
            nvidia_cdi_hook(
                hook_path, "enable-cuda-compat", f"--host-driver-version={files.version}"
            )
        )
        folders = _unique_dirs(lib.path for lib in files.libraries if _is_library_name(lib.path))
        hooks.append(
            nvidia_cdi_hook(
                hook_path, "update-ldcache", *(a for d in folders for a in ("--folder", d))
            )
        )
        hooks.append(nvidia_cdi_hook(hook_path, "disable-device-node-modification"))
    # By depth, then path, as nvcdi orders them: a mount never hides a deeper one made first.
    mounts.sort(
        key=lambda m: (len([p for p in m.container_path.split("/") if p]), m.container_path)
    )
    return ContainerEdits(
        env=(f"NVIDIA_CTK_LIBCUDA_DIR={files.lib_dir}", "NVIDIA_VISIBLE_DEVICES=void"),
        mounts=tuple(mounts),
        hooks=tuple(hooks),
    )


def _link_args(links: Iterable[str]) -> list[str]:
    return [arg for link in links for arg in ("--link", link)]
