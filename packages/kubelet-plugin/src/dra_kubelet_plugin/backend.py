"""The GPU plugin's device backend (``--device-backend``), chosen once at start.

:func:`open_backend` is the one place that reads the choice: it opens the device library
(:func:`dra_nvlib.open_device_lib`) and picks the parts that differ between real and fake GPUs,
which the wiring (:mod:`dra_kubelet_plugin.plugin`, :mod:`dra_kubelet_plugin.cli`) injects:

=================  ===============================  ===============================
part               ``nvml`` (real GPUs)             ``fake`` (simulated fleet)
=================  ===============================  ===============================
``lib``            NVML                             the fake fleet's state file
``edits``          :class:`NvmlEdits`               :class:`FakeEdits`
``mps_launcher``   :class:`NvidiaMpsLauncher`       :class:`FakeMpsLauncher`
``host``           :class:`VfioHostNodes`           :class:`StandInDeviceNodes`
``fabric_manager`` ``libnvfm`` (no binding: refuses  :class:`FakeFabricManager` next to
                   to start on an NVSwitch node)    the fleet's state (HGX layout)
=================  ===============================  ===============================

With ``--mps-daemon-launcher deployment`` (the chart's choice), ``mps_deployment`` opens a
:class:`DeploymentMpsLauncher` once the API client is up, which runs each daemon in a
Deployment of its own with the backend's command (the driver's ``nvidia-cuda-mps-control`` or
the fake daemon through this image's python) and asks the pipe as the launcher above does;
with ``process`` it is ``None`` and ``mps_launcher`` runs the daemons.

``fabric_manager`` is opened only with gate ``FabricManagerPartitioning``; it answers
``None`` where the node has no NVSwitch fabric (real: none detected, as NVIDIA's driver
skips Fabric Manager then; fake: a GPU count that is not a power of two, or a fleet kept in
memory).

Nothing below takes a "fake" flag: the parts behave as their backend does.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from dra_kube_client import JsonTransport
from dra_kubelet_core.host_devices import HostDevices, StandInDeviceNodes
from dra_nvlib import (
    DeviceLib,
    DeviceLibConfig,
    FabricManager,
    FakeFabricManager,
    FakeStateStoreKind,
    fake_fabric_manager_path,
    fm_connection,
    has_nvswitch_fabric,
    open_device_lib,
    open_nvfm,
)
from dra_sharing import FakeMpsLauncher, MpsLauncher, NvidiaMpsLauncher, fake_mps_daemon

from dra_kubelet_plugin.container_edits import EditsProvider, FakeEdits, NvmlEdits
from dra_kubelet_plugin.driver_files import driver_tool, nvml_library_at
from dra_kubelet_plugin.mps_deployment import (
    DaemonCommand,
    DeploymentMpsLauncher,
    MpsDeploymentConfig,
    PipeCheck,
    fake_daemon_command,
    fake_pipe_answers,
    nvidia_daemon_command,
)
from dra_kubelet_plugin.settings import DRIVER_NAME, Settings
from dra_kubelet_plugin.vfio_host_nodes import VfioHostNodes

__all__ = [
    "GpuBackend",
    "backend_parts",
    "device_lib_config",
    "open_backend",
    "open_devices",
    "with_nvml_library",
]

log = logging.getLogger(__name__)

#: Opens the launcher of MPS daemon Deployments over the API client.
MpsDeploymentOpener = Callable[[JsonTransport], DeploymentMpsLauncher]

#: Opens the node's Fabric Manager (``None``: the node has no NVSwitch fabric).
FabricManagerOpener = Callable[[], FabricManager | None]


@dataclass(frozen=True)
class GpuBackend:
    """What the device backend decides for the GPU plugin; the owner closes ``lib``."""

    #: the node's GPUs
    lib: DeviceLib
    #: the CDI content of prepared devices
    edits: EditsProvider
    #: starts MPS control daemons (gate ``MPSSupport``)
    mps_launcher: MpsLauncher
    #: how device nodes (VFIO nodes of passthrough GPUs) are backed on this host
    host: HostDevices
    #: the node's Fabric Manager (gate ``FabricManagerPartitioning``)
    fabric_manager: FabricManagerOpener
    #: MPS daemons as Deployments (``--mps-daemon-launcher deployment``; else ``None``)
    mps_deployment: MpsDeploymentOpener | None = None


def _fake(settings: Settings) -> bool:
    return settings.device_backend == "fake"


def device_lib_config(settings: Settings) -> DeviceLibConfig:
    """The device library the settings select (pure).

    The fake fleet's state is ``<plugin dir>/fake-gpus.json`` unless a file is given. Printing
    slices without a state file (given, or the node's existing one) builds the fleet in memory:
    it writes nothing, so the next print may name another fleet.
    """
    state = settings.fake_gpu_state_file
    store: FakeStateStoreKind = "file"
    if _fake(settings) and state is None:
        state = settings.plugin_dir / "fake-gpus.json"
        if settings.print_resource_slices and not state.exists():
            state = None
            store = "memory" if settings.fake_gpus else "file"
    return DeviceLibConfig(
        backend="fake" if _fake(settings) else "nvml",
        driver_root=settings.container_driver_root or settings.driver_root,
        sysfs_root=settings.sysfs_root,
        proc_root=settings.proc_root,
        node_name=settings.node_name,
        fake_fleet=settings.fake_gpus or None,
        fake_state_path=state,
        fake_state_store=store,
    )


def with_nvml_library(config: DeviceLibConfig) -> DeviceLibConfig:
    """``config`` with the NVML library found below its driver root, through the root's
    ``ld.so.cache`` too (GKE-style ``/usr/local/nvidia/lib64``). Unchanged for the fake, for a
    library already given, and when none is found: NVML's own search then fails, naming the
    directories it tried."""
    if config.backend != "nvml" or config.nvml_library is not None:
        return config
    library = nvml_library_at(config.driver_root)
    return config if library is None else replace(config, nvml_library=library)


def open_devices(settings: Settings) -> DeviceLib:
    """Open the device library the settings select (the fake state's directory is made)."""
    config = with_nvml_library(device_lib_config(settings))
    if config.fake_state_path is not None:
        config.fake_state_path.parent.mkdir(parents=True, exist_ok=True)
    return open_device_lib(config)


def _no_fabric(why: str) -> None:
    log.info(
        "no NVSwitch fabric: Fabric Manager partitions not used",
        extra={"event": "fabric_manager_skipped", "reason": why},
    )


def _fake_fabric_manager(lib: DeviceLib, state: Path | None) -> FabricManagerOpener:
    def open_fm() -> FabricManager | None:
        if state is None:
            _no_fabric("the fake fleet is kept in memory")
            return None
        count = len(lib.gpus())
        if count < 1 or count & (count - 1):
            _no_fabric(f"{count} fake GPUs are no HGX baseboard (a power of two)")
            return None
        return FakeFabricManager(fake_fabric_manager_path(state), gpu_count=count)

    return open_fm


def _nvfm(settings: Settings) -> FabricManagerOpener:
    def open_fm() -> FabricManager | None:
        if not has_nvswitch_fabric(proc_root=settings.proc_root, sysfs_root=settings.sysfs_root):
            _no_fabric("no NVSwitch devices and no NVLink5 switch-managed fabric")
            return None
        return open_nvfm(fm_connection(os.environ))

    return open_fm


def _deployments(
    settings: Settings,
    command: DaemonCommand,
    check: PipeCheck,
    *,
    provides_client: bool,
    host_dirs: tuple[tuple[Path, Path], ...] = (),
) -> MpsDeploymentOpener | None:
    if settings.mps_daemon_launcher != "deployment":
        return None
    config = MpsDeploymentConfig(
        driver=DRIVER_NAME,
        namespace=settings.namespace,
        node_name=settings.node_name,
        image=settings.mps_daemon_image,
        host_dirs=host_dirs,
    )

    def open_launcher(transport: JsonTransport) -> DeploymentMpsLauncher:
        return DeploymentMpsLauncher(
            transport, config, command=command, pipe_check=check, provides_client=provides_client
        )

    return open_launcher


def backend_parts(settings: Settings, lib: DeviceLib) -> GpuBackend:
    """The parts of the backend the settings select, around an open ``lib`` (no I/O).

    Raises:
        MpsDeploymentConfigError: ``--mps-daemon-launcher deployment`` without a setting it
            needs (named).
    """
    if _fake(settings):
        # The Deployment's container is this image: its python runs the same daemon file.
        fake_command = fake_daemon_command(sys.executable, Path(fake_mps_daemon.__file__))
        return GpuBackend(
            lib=lib,
            edits=FakeEdits(settings.plugin_dir / "claims"),
            mps_launcher=FakeMpsLauncher(),
            host=StandInDeviceNodes(),
            fabric_manager=_fake_fabric_manager(lib, device_lib_config(settings).fake_state_path),
            mps_deployment=_deployments(
                settings, fake_command, fake_pipe_answers, provides_client=True
            ),
        )
    root = settings.container_driver_root or settings.driver_root
    control = driver_tool(root, "nvidia-cuda-mps-control")
    return GpuBackend(
        lib=lib,
        edits=NvmlEdits(
            driver_root=settings.driver_root,
            container_driver_root=settings.container_driver_root,
            dev_root=settings.dev_root,
            cdi_hook_path=settings.nvidia_cdi_hook_path,
        ),
        mps_launcher=NvidiaMpsLauncher(control),
        host=VfioHostNodes(vfio_dir=settings.vfio_dir, sysfs_root=settings.sysfs_root),
        fabric_manager=_nvfm(settings),
        mps_deployment=_deployments(
            settings,
            nvidia_daemon_command(control),
            NvidiaMpsLauncher(control, mount_shm=False).alive,
            provides_client=False,
            host_dirs=((settings.driver_root, root),),
        ),
    )


def open_backend(settings: Settings) -> GpuBackend:
    """Open the device library and choose the backend's parts (once, at start)."""
    return backend_parts(settings, open_devices(settings))
