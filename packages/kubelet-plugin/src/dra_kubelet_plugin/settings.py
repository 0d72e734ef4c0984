"""The plugin's settings: every one a flag with an environment twin and a documented default.

:func:`build_parser` defines the command line; :func:`settings_from_args` validates it into
an immutable :class:`Settings`. Pure: reads only the mapping of environment variables given.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dra_sharing import ConsumableShares, ConsumableSharesError, parse_consumable_shares

from dra_kubelet_plugin.errors import ConfigurationError
from dra_kubelet_plugin.feature_gates import defaults, parse_feature_gates, unimplemented
from dra_kubelet_plugin.health_monitor import XIDS_TO_IGNORE_FLAG, parse_xid_list

__all__ = ["DRIVER_NAME", "FEATURE_GATES", "Settings", "build_parser", "settings_from_args"]

DRIVER_NAME = "gpu.nvidia.com"

#: Every known feature gate at its default (the table is :data:`feature_gates.GATES`).
FEATURE_GATES: Mapping[str, bool] = defaults()


@dataclass(frozen=True)
class Settings:
    """Validated settings of one plugin process."""

    node_name: str
    cdi_root: Path = Path("/var/run/cdi")
    registrar_dir: Path = Path("/var/lib/kubelet/plugins_registry")
    plugins_dir: Path = Path("/var/lib/kubelet/plugins")
    driver_root: Path = Path("/")
    container_driver_root: Path | None = None
    dev_root: Path = Path("/")
    device_backend: str = "nvml"
    fake_gpus: str = ""
    fake_gpu_state_file: Path | None = None
    healthcheck_port: int = -1
    http_endpoint: str = ""
    metrics_path: str = "/metrics"
    additional_xids_to_ignore: frozenset[int] = frozenset()
    feature_gates: Mapping[str, bool] = field(default_factory=lambda: dict(FEATURE_GATES))
    #: The gates named in ``--feature-gates`` (the rest are at their defaults).
    explicit_gates: frozenset[str] = frozenset()
    kubeconfig: str = ""
    verbosity: int = 0
    pod_uid: str = ""
    claims_directory: Path | None = None
    boot_id_file: Path = Path("/proc/sys/kernel/random/boot_id")
    stale_claim_cleanup_interval_s: float = 600.0
    device_refresh_interval_s: float = 30.0
    print_resource_slices: bool = False
    consumable_shares: ConsumableShares = field(default_factory=ConsumableShares)

    @property
    def plugin_dir(self) -> Path:
        """``<plugins dir>/gpu.nvidia.com``: sockets, checkpoint, lock, per-claim files."""
        return self.plugins_dir / DRIVER_NAME

    def gate(self, name: str) -> bool:
        """Whether feature gate ``name`` is on."""
        return self.feature_gates.get(name, False)

    def unimplemented_gates(self) -> dict[str, bool]:
        """Gates set in ``--feature-gates`` that this plugin accepts but has not built yet."""
        return unimplemented(self.explicit_gates, self.feature_gates)


# (flag, env var, default, help) -- the single table the README's flag list is made from.
_FLAGS: Sequence[tuple[str, str, str, str]] = (
    ("--node-name", "NODE_NAME", "", "name of this node (pool name, slice owner); required"),
    ("--cdi-root", "CDI_ROOT", "/var/run/cdi", "directory for the per-claim transient CDI specs"),
    (
        "--kubelet-registrar-directory-path",
        "KUBELET_REGISTRAR_DIRECTORY_PATH",
        "/var/lib/kubelet/plugins_registry",
        "the kubelet's plugin registration directory",
    ),
    (
        "--kubelet-plugins-directory-path",
        "KUBELET_PLUGINS_DIRECTORY_PATH",
        "/var/lib/kubelet/plugins",
        "the kubelet's plugins directory (DRA socket, checkpoint under gpu.nvidia.com/)",
    ),
    ("--nvidia-driver-root", "NVIDIA_DRIVER_ROOT", "/", "where the NVIDIA driver is installed"),
    (
        "--container-driver-root",
        "CONTAINER_DRIVER_ROOT",
        "",
        "where this process sees the driver root (default: --nvidia-driver-root)",
    ),
    ("--dev-root", "DEV_ROOT", "/", "where this process sees the host's /dev (node checks)"),
    ("--device-backend", "DEVICE_BACKEND", "nvml", "nvml (real GPUs) or fake"),
    ("--fake-gpus", "FAKE_GPUS", "", "fake fleet, e.g. 8xH100-80GB (fake backend)"),
    (
        "--fake-gpu-state-file",
        "FAKE_GPU_STATE_FILE",
        "",
        "fake backend state file (default: <plugins dir>/gpu.nvidia.com/fake-gpus.json)",
    ),
    ("--healthcheck-port", "HEALTHCHECK_PORT", "-1", "TCP port of grpc.health.v1; -1 disables"),
    (
        "--http-endpoint",
        "HTTP_ENDPOINT",
        "",
        "host:port of the Prometheus metrics endpoint; empty disables",
    ),
    ("--metrics-path", "METRICS_PATH", "/metrics", "HTTP path of the metrics on --http-endpoint"),
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
    ("--kubeconfig", "KUBECONFIG", "", "kubeconfig file; in-cluster config when empty"),
    ("--pod-uid", "POD_UID", "", "this pod's UID: enables rolling-update socket names"),
    (
        "--claims-directory",
        "CLAIMS_DIRECTORY",
        "",
        "TESTING ONLY: read claims from <dir>/<ns>/<name>.json instead of an API server",
    ),
    (
        "--boot-id-file",
        "BOOT_ID_FILE",
        "/proc/sys/kernel/random/boot_id",
        "file holding the node's boot ID",
    ),
    (
        "--stale-claim-cleanup-interval",
        "STALE_CLAIM_CLEANUP_INTERVAL",
        "600",
        "seconds between cleanups of half-prepared claims whose ResourceClaim is gone",
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
    for flag, env, default, text in _FLAGS:
        parser.add_argument(flag, default=environ.get(env, default), help=f"{text} [${env}]")
    parser.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=int,
        default=int(environ.get("LOG_VERBOSITY", "0") or 0),
        help="log verbosity: 0 info, 1+ debug of the plugin, 6+ client debug [$LOG_VERBOSITY]",
    )
    parser.add_argument(
        "--print-resource-slices",
        action="store_true",
        help="print the ResourceSlices this node would publish (YAML) and exit",
    )
    return parser


def _int(value: str, flag: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(flag, f"{value!r} is not an integer") from None


def _seconds(value: str, flag: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigurationError(flag, f"{value!r} is not a number of seconds") from None
    if seconds <= 0:
        raise ConfigurationError(flag, f"{value!r} must be positive")
    return seconds


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Validate parsed arguments.

    Raises:
        ConfigurationError: naming the flag that is wrong.
    """
    if not args.node_name:
        raise ConfigurationError("--node-name", "required (or set NODE_NAME)")
    if args.device_backend not in ("nvml", "fake"):
        raise ConfigurationError("--device-backend", f"{args.device_backend!r} is not nvml|fake")
    if args.device_backend == "fake" and not args.fake_gpus and not args.fake_gpu_state_file:
        raise ConfigurationError("--fake-gpus", "required with --device-backend fake")
    port = _int(args.healthcheck_port, "--healthcheck-port")
    if port < -1 or port > 65535:
        raise ConfigurationError("--healthcheck-port", f"{port} is not a port (or -1)")
    if args.http_endpoint and ":" not in args.http_endpoint:
        raise ConfigurationError("--http-endpoint", f"{args.http_endpoint!r} is not host:port")
    gates, explicit = parse_feature_gates(args.feature_gates)
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
    interval = _seconds(args.stale_claim_cleanup_interval, "--stale-claim-cleanup-interval")
    refresh = _seconds(args.device_refresh_interval, "--device-refresh-interval")
    paths = {
        "--cdi-root": args.cdi_root,
        "--kubelet-registrar-directory-path": args.kubelet_registrar_directory_path,
        "--kubelet-plugins-directory-path": args.kubelet_plugins_directory_path,
        "--nvidia-driver-root": args.nvidia_driver_root,
        "--dev-root": args.dev_root,
        "--container-driver-root": args.container_driver_root or "/",
    }
    for flag, value in paths.items():
        if not Path(value).is_absolute():
            raise ConfigurationError(flag, f"{value!r} must be an absolute path")
    return Settings(
        node_name=args.node_name,
        cdi_root=Path(args.cdi_root),
        registrar_dir=Path(args.kubelet_registrar_directory_path),
        plugins_dir=Path(args.kubelet_plugins_directory_path),
        driver_root=Path(args.nvidia_driver_root),
        container_driver_root=(
            Path(args.container_driver_root) if args.container_driver_root else None
        ),
        dev_root=Path(args.dev_root),
        device_backend=args.device_backend,
        fake_gpus=args.fake_gpus,
        fake_gpu_state_file=Path(args.fake_gpu_state_file) if args.fake_gpu_state_file else None,
        healthcheck_port=port,
        http_endpoint=args.http_endpoint,
        metrics_path="/" + args.metrics_path.strip("/"),
        additional_xids_to_ignore=parse_xid_list(args.additional_xids_to_ignore),
        feature_gates=gates,
        explicit_gates=explicit,
        kubeconfig=args.kubeconfig,
        verbosity=args.verbosity,
        pod_uid=args.pod_uid,
        claims_directory=Path(args.claims_directory) if args.claims_directory else None,
        boot_id_file=Path(args.boot_id_file),
        stale_claim_cleanup_interval_s=interval,
        device_refresh_interval_s=refresh,
        print_resource_slices=bool(args.print_resource_slices),
        consumable_shares=shares,
    )
