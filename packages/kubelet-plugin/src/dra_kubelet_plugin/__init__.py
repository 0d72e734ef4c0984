"""The gpu.nvidia.com kubelet DRA plugin.

Public API (everything else is internal)::

    from dra_kubelet_plugin import (
        DRIVER_NAME,            # "gpu.nvidia.com"
        Settings,               # validated settings (see settings.build_parser)
        KubeletPlugin,          # the running plugin: await KubeletPlugin(settings).run(stop)
        build_inventory,        # dra_nvlib GpuInfo -> published NodeDevice list (pure)
        build_resource_slices,  # NodeDevice list -> resource.k8s.io/v1 ResourceSlice JSON (pure)
        SliceSpec,
        main,                   # the dra-kubelet-plugin command
    )
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dra_kubelet_plugin.cli import main
    from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
    from dra_kubelet_plugin.plugin import KubeletPlugin
    from dra_kubelet_plugin.settings import DRIVER_NAME, Settings
    from dra_kubelet_plugin.slices import SliceSpec, build_resource_slices

# Loaded on first use, so that importing ``dra_kubelet_plugin.core`` (the compute-domain
# plugin does) loads neither the GPU plugin nor dra_nvlib.
_PUBLIC = {
    "DRIVER_NAME": "settings",
    "KubeletPlugin": "plugin",
    "NodeDevice": "inventory",
    "Settings": "settings",
    "SliceSpec": "slices",
    "build_inventory": "inventory",
    "build_resource_slices": "slices",
    "main": "cli",
}

__all__ = [
    "DRIVER_NAME",
    "KubeletPlugin",
    "NodeDevice",
    "Settings",
    "SliceSpec",
    "build_inventory",
    "build_resource_slices",
    "main",
]


def __getattr__(name: str) -> Any:
    """The public names, imported from their modules on first use."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
