"""The gpu.nvidia.com kubelet DRA plugin, on the driver-agnostic core ``dra_kubelet_core``.

Public API (everything else is internal)::

    from dra_kubelet_plugin import (
        DRIVER_NAME,            # "gpu.nvidia.com"
        Settings,               # validated settings (see settings.build_parser)
        KubeletPlugin,          # the running plugin: await KubeletPlugin(settings).run(stop)
        NodeDevice,             # one published GPU or MIG device
        build_inventory,        # dra_nvlib GpuInfo -> published NodeDevice list (pure)
        build_resource_slices,  # NodeDevice list -> resource.k8s.io/v1 ResourceSlice JSON (pure)
        SliceSpec,
        main,                   # the dra-kubelet-plugin command
    )
"""

from __future__ import annotations

from dra_kubelet_plugin.cli import main
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_kubelet_plugin.plugin import KubeletPlugin
from dra_kubelet_plugin.settings import DRIVER_NAME, Settings
from dra_kubelet_plugin.slices import SliceSpec, build_resource_slices

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
