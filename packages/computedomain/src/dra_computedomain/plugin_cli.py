"""``dra-compute-domain-kubelet-plugin``: the compute-domain kubelet plugin (the second
container of the plugin DaemonSet).

Flags are the core's (``--node-name``, ``--cdi-root``, the kubelet directories, health check
and metrics endpoints, ...) plus the driver namespace and the device backend the node's clique
ID is read from (NVML fabric info, or the fake fleet).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from dra_api_types import COMPUTE_DOMAIN_DRIVER
from dra_api_types.errors import FeatureGateError
from dra_api_types.nvidia_gates import parse_feature_gates
from dra_kube_client import KubeApiError
from dra_kubelet_core.errors import ConfigurationError, PluginError
from dra_kubelet_core.health import HealthHub
from dra_kubelet_core.logs import configure_logging
from dra_kubelet_core.runner import PluginRunner
from dra_kubelet_core.settings import (
    CommonSettings,
    add_flags,
    common_flags,
    common_settings_from_args,
)
from dra_nvlib import DeviceLibConfig, NvlibError, has_nvswitch_fabric, open_device_lib

from .channel_nodes import ChannelNodes
from .clique_id import FabricPolicy, node_clique_id
from .domain_cache import DomainCache
from .errors import CliqueIdError
from .gate_log import log_unbuilt_gates
from .host_imex import DRIVER_MANAGED, HostImex, check_imex_mode
from .node_api import NodeApi
from .plugin_backend import open_backend
from .plugin_driver import (
    RETRY,
    ComputeDomainDriver,
    compute_domain_identity,
    compute_domain_slices,
)
from .plugin_settings import PluginSettings

__all__ = [
    "PluginSettings",
    "build_parser",
    "fabric_policy",
    "main",
    "read_clique_id",
    "settings_from_args",
]

log = logging.getLogger("dra_computedomain")
_DOMAIN_DIR_CLEANUP_S = 600.0


def build_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    """The core's flags and this plugin's, each with its environment twin."""
    parser = argparse.ArgumentParser(prog="dra-compute-domain-kubelet-plugin", description=__doc__)
    own = (
        ("--namespace", "NAMESPACE", "default", "driver namespace (ComputeDomainCliques)"),
        ("--device-backend", "DEVICE_BACKEND", "nvml", "nvml (real GPUs) or fake"),
        ("--fake-gpus", "FAKE_GPUS", "", "fake fleet, e.g. 4xGB200 (backend fake)"),
        ("--fake-gpu-state-file", "FAKE_GPU_STATE_FILE", "", "fake node state file"),
        ("--nvidia-driver-root", "NVIDIA_DRIVER_ROOT", "/", "where the NVIDIA driver is"),
        ("--dev-root", "DEV_ROOT", "/", "where this process sees the host's /dev (channel nodes)"),
        ("--proc-root", "PROC_ROOT", "/proc", "where this process sees /proc (devices majors)"),
        (
            "--alt-proc-devices-path",
            "ALT_PROC_DEVICES_PATH",
            "",
            "file read in place of <proc-root>/devices (NVIDIA's, for mock NVML nodes)",
        ),
        ("--feature-gates", "FEATURE_GATES", "", "Gate=true|false,... (NVIDIA's gates)"),
        ("--imex-mode", "IMEX_MODE", DRIVER_MANAGED, "driverManaged or hostManaged (NVIDIA's)"),
        ("--imex-isolation", "IMEX_ISOLATION", "domain", "domain (channel is not supported)"),
        (
            "--imex-host-socket-path",
            "IMEX_HOST_SOCKET_PATH",
            "/etc/nvidia-imex/imex_ctrl.sock",
            "hostManaged: the host nvidia-imex's command socket, below the driver root",
        ),
        (
            "--gpu-clique-label-enabled",
            "GPU_CLIQUE_LABEL_ENABLED",
            "false",
            "true: label the node nvidia.com/gpu.clique=<clique ID> at start (NVIDIA's)",
        ),
    )
    add_flags(parser, [*common_flags(COMPUTE_DOMAIN_DRIVER).values(), *own], environ)
    return parser


def settings_from_args(args: argparse.Namespace) -> PluginSettings:
    """Validated settings; a bad one is a :class:`ConfigurationError` naming the flag."""
    common = CommonSettings(**common_settings_from_args(args))
    if args.device_backend not in ("nvml", "fake"):
        raise ConfigurationError("--device-backend", f"{args.device_backend!r}: nvml or fake")
    if common.claims_directory is not None:
        raise ConfigurationError("--claims-directory", "the compute-domain plugin needs an API")
    alt = args.alt_proc_devices_path
    if alt and not Path(alt).is_absolute():
        raise ConfigurationError("--alt-proc-devices-path", f"{alt!r} must be an absolute path")
    try:
        gates, _ = parse_feature_gates(args.feature_gates)
    except FeatureGateError as exc:
        # The plugin's CLI reports every bad flag as a ConfigurationError.
        raise ConfigurationError(exc.setting, exc.message) from exc
    host = check_imex_mode(args.imex_mode, args.imex_isolation, gates)
    host_imex = (
        HostImex(socket_path=args.imex_host_socket_path, driver_root=Path(args.nvidia_driver_root))
        if host
        else None
    )
    label = str(args.gpu_clique_label_enabled).strip().lower()
    if label not in ("true", "false"):
        raise ConfigurationError("--gpu-clique-label-enabled", f"{label!r}: true or false")
    return PluginSettings(
        common=common,
        namespace=args.namespace,
        device_backend=args.device_backend,
        fake_gpus=args.fake_gpus,
        fake_gpu_state_file=Path(args.fake_gpu_state_file) if args.fake_gpu_state_file else None,
        driver_root=Path(args.nvidia_driver_root),
        dev_root=Path(args.dev_root),
        proc_root=Path(args.proc_root),
        alt_proc_devices=Path(alt) if alt else None,
        gpu_clique_label=label == "true",
        host_imex=host_imex,
        crash_on_fabric_errors=gates["CrashOnNVLinkFabricErrors"],
        fabric_manager_partitioning=gates["FabricManagerPartitioning"],
    )


def fabric_policy(settings: PluginSettings, devices: DeviceLibConfig) -> FabricPolicy:
    """How fabric errors are read on this node: the gates, and whether it has an NVSwitch
    fabric (only looked for with ``FabricManagerPartitioning``, as NVIDIA's plugin does).

    Raises:
        CliqueIdError: the NVSwitch devices cannot be read.
    """
    pending = False
    if settings.fabric_manager_partitioning:
        try:
            pending = has_nvswitch_fabric(
                proc_root=devices.proc_root, sysfs_root=devices.sysfs_root
            )
        except OSError as exc:
            raise CliqueIdError(
                settings.common.node_name, f"checking for an NVSwitch fabric: {exc}"
            ) from exc
    return FabricPolicy(crash_on_errors=settings.crash_on_fabric_errors, pending_partition=pending)


def read_clique_id(
    devices: DeviceLibConfig, node_name: str, policy: FabricPolicy | None = None
) -> str:
    """The node's clique ID from its GPUs' fabric info ("" without NVLink fabric).

    Raises:
        CliqueIdError: GPUs disagree, or (``CrashOnNVLinkFabricErrors``) a fabric error.
    """
    with open_device_lib(devices) as lib:
        return node_clique_id(node_name, lib.gpus(), policy)


async def _clean_domain_dirs(api: NodeApi, domains_dir: Path) -> None:
    """Remove the config directories of domains that no longer exist (NVIDIA: 10 minutes)."""
    while True:
        await asyncio.sleep(_DOMAIN_DIR_CLEANUP_S)
        try:
            for path in sorted(domains_dir.glob("*")):
                if path.is_dir() and await asyncio.to_thread(api.domain, path.name) is None:
                    await asyncio.to_thread(shutil.rmtree, path, True)
                    log.info(
                        "domain dir removed",
                        extra={"event": "domain_dir_removed", "domain_uid": path.name},
                    )
        except KubeApiError as exc:
            log.warning(
                "domain dir cleanup failed", extra={"event": "cleanup_failed", "error": str(exc)}
            )


async def run(settings: PluginSettings, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set."""
    s = settings.common
    async with PluginRunner(s, compute_domain_identity()) as runner:
        backend = await asyncio.to_thread(open_backend, settings, runner.plugin_dir)
        policy = await asyncio.to_thread(fabric_policy, settings, backend.devices)
        clique_id = await asyncio.to_thread(read_clique_id, backend.devices, s.node_name, policy)
        log.info("clique", extra={"event": "clique_id", "clique_id": clique_id})
        await runner.connect()
        assert runner.transport is not None  # no --claims-directory (checked)
        informers_stop = threading.Event()
        domains = DomainCache(runner.transport)
        domains.start(informers_stop)
        api = NodeApi(
            runner.transport,
            node_name=s.node_name,
            driver_namespace=settings.namespace,
            domains=domains,
        )
        if settings.gpu_clique_label:
            await asyncio.to_thread(api.set_clique_label, clique_id)
        domains_dir = runner.plugin_dir / "domains"
        driver = ComputeDomainDriver(
            api,
            clique_id=clique_id,
            domains_dir=domains_dir,
            channel_nodes=ChannelNodes(
                backend.host, settings.proc_root, proc_devices=settings.alt_proc_devices
            ),
            host_imex=backend.host_imex,
        )
        engine = runner.engine(driver, retry=RETRY, hooks=driver)
        await engine.start()
        await runner.serve_dra(engine, health=None)
        await runner.register()
        await runner.serve_endpoints()
        runner.publish(
            lambda generation: compute_domain_slices(
                s.node_name, runner.node_uid, generation, daemons=backend.host_imex is None
            ),
            health=HealthHub(s.node_name),
        )
        runner.cleanup_periodically(engine)
        runner.task(_clean_domain_dirs(api, domains_dir), name="domain-dirs")
        log.info("plugin started", extra={"event": "started", "node": s.node_name})
        try:
            await runner.wait(stop)
        finally:
            informers_stop.set()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: 2 for bad settings, 1 for start failures."""
    args = build_parser(os.environ).parse_args(argv)
    configure_logging(args.verbosity)
    logging.getLogger("dra_computedomain").setLevel(
        logging.DEBUG if args.verbosity >= 1 else logging.INFO
    )
    try:
        settings = settings_from_args(args)
    except ConfigurationError as exc:
        log.error(str(exc), extra={"event": "bad_settings", "setting": exc.setting})
        return 2
    log_unbuilt_gates(args.feature_gates, log)

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run(settings, stop)

    try:
        asyncio.run(_main())
    except (PluginError, KubeApiError, NvlibError, CliqueIdError) as exc:
        log.error(str(exc), extra={"event": "fatal", "error_type": type(exc).__name__})
        return 1
    with contextlib.suppress(Exception):
        log.info("stopped", extra={"event": "stopped"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
