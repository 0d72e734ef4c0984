"""A GPU's DRM nodes (``/dev/dri/card*``, ``renderD*``) and their ``by-path`` links.

nvidia-container-toolkit (v1.19, ``nvml`` mode) gives each full GPU, and each MIG device
whose profile has the ``gfx`` attribute, the DRM nodes the kernel lists for the GPU's PCI
function: ``/sys/bus/pci/devices/<bus id>/drm/<name>`` is ``/dev/dri/<name>``, every entry of
that directory in name order, where the node exists. Udev's
``/dev/dri/by-path/pci-<bus id>-card`` and ``-render`` links that point at one of those nodes
are recreated in the container by a ``create-symlinks`` hook (``<target as read>::<link>``),
so graphics stacks that open a GPU by its PCI path find it.

:func:`read_drm_devices` reads sysfs and ``/dev`` (the I/O edge); :func:`drm_node_paths` and
:func:`by_path_links` are the pure rules.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DrmDevices",
    "by_path_links",
    "drm_node_paths",
    "profile_has_graphics",
    "read_drm_devices",
]

_DRI = "/dev/dri"


@dataclass(frozen=True)
class DrmDevices:
    """What the host has for one GPU: its existing DRM nodes and its ``by-path`` links.

    ``nodes`` are container paths (``/dev/dri/card1``); ``links`` are ``(link, target)``
    pairs, the target exactly as ``readlink`` returned it.
    """

    nodes: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()


def drm_node_paths(sysfs_entries: Iterable[str]) -> list[str]:
    """``/dev/dri/<entry>`` for each entry of the GPU's sysfs ``drm`` directory, sorted."""
    return [f"{_DRI}/{name}" for name in sorted(sysfs_entries)]


def by_path_link_names(pci_bus_id: str) -> tuple[str, str]:
    """The two udev links of a GPU: ``/dev/dri/by-path/pci-<bus id>-card`` and ``-render``."""
    return (f"{_DRI}/by-path/pci-{pci_bus_id}-card", f"{_DRI}/by-path/pci-{pci_bus_id}-render")


def by_path_links(links: Iterable[tuple[str, str]], nodes: Collection[str]) -> list[str]:
    """``create-symlinks`` arguments (``target::link``) for the links that point at one of
    ``nodes``; a relative target is resolved against the link's directory, as the toolkit
    does, and kept as read in the argument."""
    args = []
    for link, target in links:
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
        if resolved in nodes:
            args.append(f"{target}::{link}")
    return args


def profile_has_graphics(profile_name: str) -> bool:
    """Whether a MIG profile name (``1g.10gb+gfx``, ``1g.24gb+me+gfx``) has ``gfx``."""
    return "gfx" in profile_name.split("+")[1:]


def read_drm_devices(*, sys_root: Path, dev_root: Path, pci_bus_id: str) -> DrmDevices:
    """The GPU's DRM nodes that exist below ``dev_root`` and its ``by-path`` links.

    ``sys_root`` is where this process sees ``/sys``; a GPU without a ``drm`` directory (a
    compute-only driver setup, ``nvidia-drm`` not loaded) has none.
    """
    drm_dir = sys_root / "bus" / "pci" / "devices" / pci_bus_id / "drm"
    try:
        entries = [entry.name for entry in drm_dir.iterdir()]
    except OSError:
        return DrmDevices()
    # Only character devices, as the toolkit's locator: a stale regular file is no node.
    nodes = tuple(
        path for path in drm_node_paths(entries) if (dev_root / path.lstrip("/")).is_char_device()
    )
    links = []
    for link in by_path_link_names(pci_bus_id):
        try:
            links.append((link, os.readlink(dev_root / link.lstrip("/"))))
        except OSError:
            continue
    return DrmDevices(nodes=nodes, links=tuple(links))
