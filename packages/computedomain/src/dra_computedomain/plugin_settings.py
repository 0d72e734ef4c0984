"""The compute-domain kubelet plugin's validated settings (parsed by :mod:`.plugin_cli`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dra_kubelet_core.settings import CommonSettings

from .host_imex import HostImex

__all__ = ["PluginSettings"]


@dataclass(frozen=True)
class PluginSettings:
    """The core's settings plus this plugin's."""

    common: CommonSettings
    namespace: str
    device_backend: str
    fake_gpus: str
    fake_gpu_state_file: Path | None
    driver_root: Path
    dev_root: Path = Path("/")
    proc_root: Path = Path("/proc")
    #: read in place of ``<proc_root>/devices`` (NVIDIA's ``ALT_PROC_DEVICES_PATH``)
    alt_proc_devices: Path | None = None
    #: label the node ``nvidia.com/gpu.clique`` with its clique ID (NVIDIA's, off by default)
    gpu_clique_label: bool = False
    #: host-managed IMEX (``--imex-mode=hostManaged``): the host's daemon, else None
    host_imex: HostImex | None = None
    #: ``CrashOnNVLinkFabricErrors``: refuse to start on an NVLink fabric error (NVIDIA's default)
    crash_on_fabric_errors: bool = True
    #: ``FabricManagerPartitioning``: on an NVSwitch node, unregistered GPUs await a partition
    fabric_manager_partitioning: bool = False
