"""The GPU plugin's settings: every one a flag with an environment twin and a documented default.

The core's settings (:mod:`dra_kubelet_core.settings`) plus the GPU ones;
:func:`build_parser` defines the command line; :func:`settings_from_args` validates it into
an immutable :class:`Settings`. Pure: reads only the mapping of environment variables given.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dra_api_types import GPU_DRIVER
from dra_api_types.errors import FeatureGateError
from dra_api_types.nvidia_gates import defaults, parse_feature_gates, unimplemented
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.settings import (
    CommonSettings,
    Flag,
    add_flags,
    common_flags,
    common_settings_from_args,
    parse_seconds,
)
from dra_sharing import ConsumableShares, ConsumableSharesError, parse_consumable_shares

from dra_kubelet_plugin.health_monitor import XIDS_TO_IGNORE_FLAG, parse_xid_list

__all__ = ["DRIVER_NAME", "FEATURE_GATES", "Settings", "build_parser", "settings_from_args"]

DRIVER_NAME = GPU_DRIVER

#: Every known feature gate at its default (table: :data:`dra_api_types.nvidia_gates.GATES`).
FEATURE_GATES: Mapping[str, bool] = defaults()


@dataclass(frozen=True)
class Settings(CommonSettings):
    """Validated settings of one GPU plugin process (the core's, then the GPU ones)."""

    driver_root: Path = Path("/")
    container_driver_root: Path | None = None
    nvidia_cdi_hook_path: str | None = None
    dev_root: Path = Path("/")
    vfio_dir: Path = Path("/dev/vfio")
    sysfs_root: Path = Path("/sys")
    proc_root: Path = Path("/proc")
    device_backend: str = "nvml"
    fake_gpus: str = ""
    fake_gpu_state_file: Path | None = None
    additional_xids_to_ignore: frozenset[int] = frozenset()
    #: Seconds without a further XID/ECC event after which a device is healthy again;
    #: ``None``: the taint stays until the plugin restarts (NVIDIA's behaviour).
    health_recovery_period_s: float | None = None
    feature_gates: Mapping[str, bool] = field(default_factory=lambda: dict(FEATURE_GATES))
    #: The gates named in ``--feature-gates`` (the rest are at their defaults).
    explicit_gates: frozenset[str] = frozenset()
    device_refresh_interval_s: float = 30.0
    print_resource_slices: bool = False
    consumable_shares: ConsumableShares = field(default_factory=ConsumableShares)
    #: Where MPS control daemons run: ``deployment`` (one Deployment each, outliving this
    #: process; the chart's choice) or ``process`` (children of this process; local runs).
    mps_daemon_launcher: str = "process"
    #: The image of MPS daemon Deployments (the driver's own).
    mps_daemon_image: str = ""
    #: The namespace of MPS daemon Deployments (this pod's).
    namespace: str = ""

    @property
    def plugin_dir(self) -> Path:
        """``<plugins dir>/gpu.nvidia.com``: sockets, checkpoint, lock, per-claim files."""
        return self.plugin_dir_of(DRIVER_NAME)

    def gate(self, name: str) -> bool:
        """Whether feature gate ``name`` is on."""
        return self.feature_gates.get(name, False)

    def unimplemented_gates(self) -> dict[str, bool]:
        """Gates set in ``--feature-gates`` that this plugin accepts but has not built yet."""
        return unimplemented(self.explicit_gates, self.feature_gates)


_COMMON = common_flags(DRIVER_NAME)

# (flag, env var, default, help) -- the single table the README's flag list is made from.
_FLAGS: Sequence[Flag] = (
    _COMMON["--node-name"],
    _COMMON["--cdi-root"],
    _COMMON["--kubelet-registrar-directory-path"],
    _COMMON["--kubelet-plugins-directory-path"],
    _COMMON["--kubelet-pod-resources-socket"],
    ("--nvidia-driver-root", "NVIDIA_DRIVER_ROOT", "/", "where the NVIDIA driver is installed"),
    (
        "--container-driver-root",
        "CONTAINER_DRIVER_ROOT",
        "",
        "where this process sees the driver root (default: --nvidia-driver-root)",
    ),
    (
        "--nvidia-cdi-hook-path",
        "NVIDIA_CDI_HOOK_PATH",
        "",
        "host path of nvidia-cdi-hook named in CDI hooks (default: found below the driver root)",
    ),
    ("--dev-root", "DEV_ROOT", "/", "where this process sees the host's /dev (node checks)"),
    (
        "--vfio-dir",
        "VFIO_DIR",
        "/dev/vfio",
        "where this process sees the host's /dev/vfio (passthrough VFIO nodes)",
    ),
    (
        "--sysfs-root",
        "SYSFS_ROOT",
        "/sys",
        "where this process sees the host's /sys (PCI facts, vfio-pci binding)",
    ),
    (
        "--proc-root",
        "PROC_ROOT",
        "/proc",
        "where this process sees the host's /proc (processes using a GPU before passthrough)",
    ),
    ("--device-backend", "DEVICE_BACKEND", "nvml", "nvml (real GPUs) or fake"),
    ("--fake-gpus", "FAKE_GPUS", "", "fake fleet, e.g. 8xH100-80GB (fake backend)"),
    (
        "--fake-gpu-state-file",
        "FAKE_GPU_STATE_FILE",
        "",
        "fake backend state file (default: <plugins dir>/gpu.nvidia.com/fake-gpus.json)",
    ),
    _COMMON["--healthcheck-port"],
    _COMMON["--http-endpoint"],
    _COMMON["--metrics-path"],
    _COMMON["--metrics-insecure"],
    _COMMON["--metrics-tls-cert-file"],
    _COMMON["--metrics-tls-key-file"],
    (
        "--feature-gates",
        "FEATURE_GATES",
        "",
        "comma-separated Gate=true|false (NVIDIA's gates, the logging gates, this plugin's)",
    ),
    (
        XIDS_TO_IGNORE_FLAG,
        "ADDITIONAL_XIDS_TO_IGNORE",
        "",
        "comma-separated XIDs the health monitor ignores besides NVIDIA's default list",
    ),
    (
        "--consumable-shares",
        "CONSUMABLE_SHARES",
        "",
        "share devices through consumable capacity: memory, unlimited or a share count N "
        "(turns the ConsumableShares gate on); empty or disabled: off",
    ),
    (
        "--health-recovery-period",
        "HEALTH_RECOVERY_PERIOD",
        "0",
        "time without a further XID/ECC event after which a device is healthy again: seconds "
        "or a duration (90s, 5m, 1h); 0: never",
    ),
    _COMMON["--kubeconfig"],
    _COMMON["--pod-uid"],
    _COMMON["--claims-directory"],
    _COMMON["--boot-id-file"],
    _COMMON["--stale-claim-cleanup-interval"],
    (
        "--mps-daemon-launcher",
        "MPS_DAEMON_LAUNCHER",
        "process",
        "where MPS control daemons run: deployment (a Deployment each, outlives this process) "
        "or process (children of this process)",
    ),
    (
        "--mps-daemon-image",
        "MPS_DAEMON_IMAGE",
        "",
        "image of MPS daemon Deployments, the driver's (with --mps-daemon-launcher deployment)",
    ),
    (
        "--namespace",
        "POD_NAMESPACE",
        "",
        "namespace of MPS daemon Deployments, this pod's (with --mps-daemon-launcher deployment)",
    ),
    (
        "--device-refresh-interval",
        "DEVICE_REFRESH_INTERVAL",
        "30",
        "seconds between re-enumerations of the GPUs (slices republished on change)",
    ),
)


def flag_table() -> Sequence[tuple[str, str, str, str]]:
    """``(flag, env var, default, help)`` of every setting."""
    return _FLAGS


def build_parser(environ: Mapping[str, str]) -> argparse.ArgumentParser:
    """The command line; each flag's default comes from its environment twin when set."""
    parser = argparse.ArgumentParser(
        prog="dra-kubelet-plugin",
        description="The gpu.nvidia.com kubelet DRA plugin.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_flags(parser, _FLAGS, environ)
    parser.add_argument(
        "--print-resource-slices",
        action="store_true",
        help="print the ResourceSlices this node would publish (YAML) and exit",
    )
    return parser


_DURATION_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def _optional_duration(value: str, flag: str) -> float | None:
    """Seconds of ``"90"``, ``"90s"``, ``"5m"`` or ``"1h"``; ``None`` for ``"0"`` or empty."""
    text = value.strip()
    if text in ("", "0", "0s"):
        return None
    unit = _DURATION_UNITS.get(text[-1:], 0.0)
    number = text[:-1] if unit else text
    return parse_seconds(number, flag) * (unit or 1.0)


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Validate parsed arguments.

    Raises:
        ConfigurationError: naming the flag that is wrong.
    """
    common = common_settings_from_args(args)
    if args.device_backend not in ("nvml", "fake"):
        raise ConfigurationError("--device-backend", f"{args.device_backend!r} is not nvml|fake")
    if args.device_backend == "fake" and not args.fake_gpus and not args.fake_gpu_state_file:
        raise ConfigurationError("--fake-gpus", "required with --device-backend fake")
    try:
        gates, explicit = parse_feature_gates(args.feature_gates)
    except FeatureGateError as exc:
        # The plugin's CLI reports every bad flag as a ConfigurationError.
        raise ConfigurationError(exc.setting, exc.message) from exc
    try:
        shares = parse_consumable_shares(args.consumable_shares)
    except ConsumableSharesError as exc:
        raise ConfigurationError("--consumable-shares", str(exc).split(": ", 1)[1]) from None
    if shares.enabled:
        # The flag is the switch NVIDIA's chart exposes; the gate only may not say no.
        if "ConsumableShares" in explicit and not gates["ConsumableShares"]:
            raise ConfigurationError(
                "--consumable-shares",
                f"{shares} needs the ConsumableShares feature gate, which "
                "--feature-gates sets to false",
            )
        gates["ConsumableShares"] = True
    if args.mps_daemon_launcher not in ("deployment", "process"):
        raise ConfigurationError(
            "--mps-daemon-launcher", f"{args.mps_daemon_launcher!r} is not deployment|process"
        )
    if args.mps_daemon_launcher == "deployment":
        for flag, value in (
            ("--mps-daemon-image", args.mps_daemon_image),
            ("--namespace", args.namespace),
        ):
            if not value:
                raise ConfigurationError(flag, "required with --mps-daemon-launcher deployment")
    refresh = parse_seconds(args.device_refresh_interval, "--device-refresh-interval")
    paths = {
        "--nvidia-driver-root": args.nvidia_driver_root,
        "--dev-root": args.dev_root,
        "--vfio-dir": args.vfio_dir,
        "--sysfs-root": args.sysfs_root,
        "--proc-root": args.proc_root,
        "--container-driver-root": args.container_driver_root or "/",
        "--nvidia-cdi-hook-path": args.nvidia_cdi_hook_path or "/",
    }
    for flag, value in paths.items():
        if not Path(value).is_absolute():
            raise ConfigurationError(flag, f"{value!r} must be an absolute path")
    return Settings(
        **common,
        driver_root=Path(args.nvidia_driver_root),
        container_driver_root=(
            Path(args.container_driver_root) if args.container_driver_root else None
        ),
        nvidia_cdi_hook_path=args.nvidia_cdi_hook_path or None,
        dev_root=Path(args.dev_root),
        vfio_dir=Path(args.vfio_dir),
        sysfs_root=Path(args.sysfs_root),
        proc_root=Path(args.proc_root),
        device_backend=args.device_backend,
        fake_gpus=args.fake_gpus,
        fake_gpu_state_file=Path(args.fake_gpu_state_file) if args.fake_gpu_state_file else None,
        additional_xids_to_ignore=parse_xid_list(args.additional_xids_to_ignore),
        health_recovery_period_s=_optional_duration(
            args.health_recovery_period, "--health-recovery-period"
        ),
        feature_gates=gates,
        explicit_gates=explicit,
        device_refresh_interval_s=refresh,
        print_resource_slices=bool(args.print_resource_slices),
        consumable_shares=shares,
        mps_daemon_launcher=args.mps_daemon_launcher,
        mps_daemon_image=args.mps_daemon_image,
        namespace=args.namespace,
    )
