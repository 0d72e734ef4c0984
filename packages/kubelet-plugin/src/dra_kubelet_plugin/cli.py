"""The ``dra-kubelet-plugin`` command: parses settings, installs signal handlers, runs."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence

from dra_kube_client import KubeClientError
from dra_kubelet_core.errors import ConfigurationError, PluginError
from dra_kubelet_core.logs import configure_logging
from dra_nvlib import NvlibError

from dra_kubelet_plugin.backend import open_backend
from dra_kubelet_plugin.inventory import unpublished_gpus
from dra_kubelet_plugin.plugin import (
    KubeletPlugin,
    enumerate_devices,
    open_partitions,
    open_passthrough,
    publishable,
    render_resource_slices,
)
from dra_kubelet_plugin.settings import Settings, build_parser, settings_from_args

__all__ = ["main"]

log = logging.getLogger("dra_kubelet_plugin")


def _print_slices(settings: Settings) -> int:
    backend = open_backend(settings)
    dynamic_mig = settings.gate("DynamicMIG")
    with backend.lib as lib:
        devices = enumerate_devices(
            lib, open_passthrough(settings, backend), dynamic_mig=dynamic_mig
        )
        gpus = lib.gpus()
        partitions = open_partitions(settings, backend)
    sys.stdout.write(render_resource_slices(settings, devices, partitions))
    published = publishable(devices, taints=settings.gate("DeviceTaints"))
    if not published:
        # stdout stays the slices alone; why they are empty goes where people read.
        for line in unpublished_gpus(
            gpus, published, dynamic_mig=dynamic_mig, taints=settings.gate("DeviceTaints")
        ):
            sys.stderr.write(f"no devices: {line}\n")
    return 0


def _log_gates(settings: Settings) -> None:
    """One line for the gates set that this plugin accepts but has not built yet."""
    pending = settings.unimplemented_gates()
    if pending:
        log.warning(
            "feature gates accepted but not implemented yet: "
            + ", ".join(f"{name}={str(on).lower()}" for name, on in pending.items()),
            extra={"event": "feature_gates_not_implemented", "gates": pending},
        )


async def _run(settings: Settings) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await KubeletPlugin(settings).run(stop)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for bad settings, 1 for start failures)."""
    parser = build_parser(os.environ)
    args = parser.parse_args(argv)
    configure_logging(args.verbosity)
    try:
        settings = settings_from_args(args)
    except ConfigurationError as exc:
        # One line naming the setting (no usage text): it is what `kubectl logs` shows.
        log.error(str(exc), extra={"event": "bad_settings", "setting": exc.setting})
        return 2
    _log_gates(settings)
    try:
        if settings.print_resource_slices:
            return _print_slices(settings)
        asyncio.run(_run(settings))
    except (PluginError, KubeClientError, NvlibError) as exc:
        log.error(str(exc), extra={"event": "fatal", "error_type": type(exc).__name__})
        return 1
    log.info("stopped", extra={"event": "stopped"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
