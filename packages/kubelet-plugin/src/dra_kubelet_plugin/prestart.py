"""The plugin pod's init check of the driver root: ``python3 -m dra_kubelet_plugin.prestart``.

Waits until ``libnvidia-ml.so.1`` is found below the driver root, as the plugin's NVML backend
looks it up (the toolkit's library directories, then the root's ``ld.so.cache``). The GPU
Operator's driver container installs the driver after this pod may have started, so a missing
library is waited for, not fatal; each wait logs why and, when the driver sits elsewhere on the
host (a wrong ``nvidiaDriverRoot``), says which value to set.

:func:`diagnose` is pure over the file tree it is given; :func:`main` adds the loop and logging.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dra_kubelet_core.logs import configure_logging

from dra_kubelet_plugin.driver_files import nvml_library_at

__all__ = ["Diagnosis", "diagnose", "main"]

log = logging.getLogger("dra_kubelet_plugin.prestart")

#: Where other setups install the driver: host path, the chart value to set, and whose it is.
_KNOWN_ROOTS: Sequence[tuple[str, str]] = (
    ("/run/nvidia/driver", "the GPU Operator's driver container"),
    ("/home/kubernetes/bin/nvidia", "GKE's driver installer"),
)


@dataclass(frozen=True)
class Diagnosis:
    """What the check found: the library (host path) or why not, with a hint."""

    library: str | None
    message: str
    hint: str = ""


def _host_path(host_root: str, relative: Path) -> str:
    return str(Path(host_root) / relative)


def diagnose(container_root: Path, host_root: str) -> Diagnosis:
    """Look for the driver below ``container_root`` (where this process sees ``host_root``).

    When ``host_root`` is ``/`` the whole host is visible, so the known driver roots of the GPU
    Operator and GKE are looked at too, to name the value that would work.
    """
    found = nvml_library_at(container_root)
    if found is not None:
        relative = found.relative_to(container_root)
        return Diagnosis(_host_path(host_root, relative), "NVIDIA driver found")
    message = f"no libnvidia-ml.so.1 below nvidiaDriverRoot {host_root!r}"
    if host_root == "/":
        for other, whose in _KNOWN_ROOTS:
            if nvml_library_at(container_root / other.lstrip("/")) is None:
                continue
            return Diagnosis(
                None,
                message,
                f"the driver is installed at {other} ({whose}): "
                f"set nvidiaDriverRoot={other} (helm --set nvidiaDriverRoot={other})",
            )
    for other, whose in _KNOWN_ROOTS:
        if host_root.rstrip("/") == other:
            return Diagnosis(
                None,
                message,
                f"waiting for {whose} to install the driver; if the driver is installed on the "
                "host instead, set nvidiaDriverRoot=/",
            )
    return Diagnosis(
        None,
        message,
        "set nvidiaDriverRoot to where the driver is installed: / for a driver on the host, "
        "/run/nvidia/driver with the GPU Operator",
    )


def _parser(environ: dict[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dra-kubelet-plugin-prestart",
        description="Wait for the NVIDIA driver below the driver root.",
    )
    parser.add_argument(
        "--nvidia-driver-root",
        default=environ.get("NVIDIA_DRIVER_ROOT", "/"),
        help="the driver root on the host [$NVIDIA_DRIVER_ROOT]",
    )
    parser.add_argument(
        "--container-driver-root",
        default=environ.get("CONTAINER_DRIVER_ROOT", ""),
        help="where this process sees it (default: --nvidia-driver-root) [$CONTAINER_DRIVER_ROOT]",
    )
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between checks")
    parser.add_argument(
        "--timeout", type=float, default=0.0, help="give up after this many seconds; 0 waits on"
    )
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Check until the driver is found (0) or ``--timeout`` passes (1); one log line a check."""
    args = _parser(dict(os.environ)).parse_args(argv)
    configure_logging(0)
    host_root = args.nvidia_driver_root
    container_root = Path(args.container_driver_root or host_root)
    deadline = clock() + args.timeout if args.timeout > 0 else None
    while True:
        found = diagnose(container_root, host_root)
        if found.library is not None:
            log.info(
                found.message,
                extra={"event": "driver_found", "library": found.library, "root": host_root},
            )
            return 0
        log.warning(
            f"{found.message}; {found.hint}",
            extra={"event": "driver_missing", "root": host_root, "hint": found.hint},
        )
        if deadline is not None and clock() >= deadline:
            return 1
        sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
