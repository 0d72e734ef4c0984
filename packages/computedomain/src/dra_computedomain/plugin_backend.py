"""The compute-domain plugin's device backend (``--device-backend``), chosen once at start.

:func:`open_backend` is the one place that reads the choice; the wiring (:mod:`.plugin_cli`)
injects its parts:

- ``devices``: the device library the node's clique ID is read from (NVML fabric info, or the
  fake fleet's state file);
- ``host``: how the IMEX channel nodes are backed: the host's own, created when missing
  (:class:`~dra_kubelet_core.host_devices.HostDeviceNodes`), or ``/dev/null`` stand-ins
  (:class:`~dra_kubelet_core.host_devices.StandInDeviceNodes`), as the GPU plugin's
  backend has for its nodes;
- ``host_imex``: with host-managed IMEX, the host's ``nvidia-imex`` (:class:`.HostImex`) or,
  on fake nodes, the fake one (:class:`.FakeHostImex`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dra_kubelet_core.host_devices import HostDeviceNodes, HostDevices, StandInDeviceNodes
from dra_nvlib import BackendName, DeviceLibConfig

from .host_imex import FakeHostImex, HostImex
from .plugin_settings import PluginSettings

__all__ = ["ComputeDomainBackend", "open_backend"]


@dataclass(frozen=True)
class ComputeDomainBackend:
    """What the device backend decides for the compute-domain plugin."""

    #: the node's GPUs (opened briefly at start, for the clique ID)
    devices: DeviceLibConfig
    #: how channel device nodes are backed on this host
    host: HostDevices
    #: host-managed IMEX: the host's daemon as this backend reaches it; None: driver-managed
    host_imex: HostImex | None


def open_backend(settings: PluginSettings, plugin_dir: Path) -> ComputeDomainBackend:
    """Choose the backend's parts (once, at start); the fake fleet's state file defaults to
    ``<plugin_dir>/fake-gpus.json``, and its directory is made."""
    host_imex = settings.host_imex
    backend: BackendName
    state: Path | None
    if settings.device_backend == "fake":
        backend = "fake"
        state = settings.fake_gpu_state_file or plugin_dir / "fake-gpus.json"
        host: HostDevices = StandInDeviceNodes()
        if host_imex is not None:
            host_imex = FakeHostImex(
                socket_path=host_imex.socket_path, driver_root=host_imex.driver_root
            )
    else:
        backend = "nvml"
        state = settings.fake_gpu_state_file
        host = HostDeviceNodes(settings.dev_root)
    if state is not None:
        state.parent.mkdir(parents=True, exist_ok=True)
    devices = DeviceLibConfig(
        backend=backend,
        driver_root=settings.driver_root,
        proc_root=settings.proc_root,
        node_name=settings.common.node_name,
        fake_fleet=settings.fake_gpus or None,
        fake_state_path=state,
    )
    return ComputeDomainBackend(devices=devices, host=host, host_imex=host_imex)
