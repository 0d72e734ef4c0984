"""Settings every kubelet plugin on the core shares, each a flag with an environment twin.

A driver's CLI adds :func:`common_flags` to its own flag table (keeping whatever order it
documents), validates them with :func:`common_settings_from_args` and extends
:class:`CommonSettings` with its own fields. Pure: reads only the parsed arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_kubelet_core.errors import ConfigurationError

__all__ = [
    "CommonSettings",
    "Flag",
    "add_flags",
    "common_flags",
    "common_settings_from_args",
    "parse_int",
    "parse_seconds",
]

#: ``(flag, env var, default, help)`` of one setting.
Flag = tuple[str, str, str, str]


@dataclass(frozen=True)
class CommonSettings:
    """Validated settings of the core: where the kubelet and the runtime look, and the
    endpoints and intervals of the services the runner starts."""

    node_name: str
    cdi_root: Path = Path("/var/run/cdi")
    registrar_dir: Path = Path("/var/lib/kubelet/plugins_registry")
    plugins_dir: Path = Path("/var/lib/kubelet/plugins")
    healthcheck_port: int = -1
    http_endpoint: str = ""
    metrics_path: str = "/metrics"
    #: Plain HTTP, nobody checked: only when asked (``--metrics-insecure=true``).
    metrics_insecure: bool = False
    metrics_tls_cert_file: str = ""
    metrics_tls_key_file: str = ""
    kubeconfig: str = ""
    verbosity: int = 0
    pod_uid: str = ""
    claims_directory: Path | None = None
    boot_id_file: Path = Path("/proc/sys/kernel/random/boot_id")
    stale_claim_cleanup_interval_s: float = 600.0
    #: The kubelet's PodResources socket, for the ``container`` label of the per-pod device
    #: series (:mod:`.pod_containers`); None: the label stays empty.
    pod_resources_socket: Path | None = None

    def plugin_dir_of(self, driver_name: str) -> Path:
        """``<plugins dir>/<driver name>``: the driver's sockets, checkpoint, lock."""
        return self.plugins_dir / driver_name


def common_flags(driver_name: str) -> dict[str, Flag]:
    """The core's flags by name, their help naming ``driver_name``'s plugin directory."""
    flags: Sequence[Flag] = (
        ("--node-name", "NODE_NAME", "", "name of this node (pool name, slice owner); required"),
        (
            "--cdi-root",
            "CDI_ROOT",
            "/var/run/cdi",
            "directory for the per-claim transient CDI specs",
        ),
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
            f"the kubelet's plugins directory (DRA socket, checkpoint under {driver_name}/)",
        ),
        (
            "--healthcheck-port",
            "HEALTHCHECK_PORT",
            "-1",
            "TCP port of grpc.health.v1; -1 disables",
        ),
        (
            "--http-endpoint",
            "HTTP_ENDPOINT",
            "",
            "host:port of the Prometheus metrics endpoint; empty disables",
        ),
        (
            "--metrics-path",
            "METRICS_PATH",
            "/metrics",
            "HTTP path of the metrics on --http-endpoint",
        ),
        (
            "--metrics-insecure",
            "METRICS_INSECURE",
            "false",
            "true: serve --http-endpoint as plain HTTP to anyone; false: HTTPS, and the metrics "
            "only to bearer tokens the API server authenticates (TokenReview) and allows to get "
            "the metrics path (SubjectAccessReview)",
        ),
        (
            "--metrics-tls-cert-file",
            "METRICS_TLS_CERT_FILE",
            "",
            "PEM certificate of the HTTPS metrics endpoint; empty: self-signed at start",
        ),
        (
            "--metrics-tls-key-file",
            "METRICS_TLS_KEY_FILE",
            "",
            "PEM key of --metrics-tls-cert-file",
        ),
        (
            "--kubelet-pod-resources-socket",
            "KUBELET_POD_RESOURCES_SOCKET",
            "/var/lib/kubelet/pod-resources/kubelet.sock",
            "the kubelet's PodResources socket, asked which containers use a claim (the "
            "container label of nvidia_dra_device_allocation_info); empty: label left empty",
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
    )
    return {f[0]: f for f in flags}


def add_flags(
    parser: argparse.ArgumentParser, flags: Sequence[Flag], environ: Mapping[str, str]
) -> None:
    """Add ``flags`` to ``parser``, each defaulting to its environment twin when set, plus
    ``-v``/``--v`` (``LOG_VERBOSITY``)."""
    for flag, env, default, text in flags:
        parser.add_argument(flag, default=environ.get(env, default), help=f"{text} [${env}]")
    parser.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=int,
        default=int(environ.get("LOG_VERBOSITY", "0") or 0),
        help="log verbosity: 0 info, 1+ debug of the plugin, 6+ client debug [$LOG_VERBOSITY]",
    )


def parse_int(value: str, flag: str) -> int:
    """``value`` as an integer, or a :class:`ConfigurationError` naming ``flag``."""
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(flag, f"{value!r} is not an integer") from None


def parse_seconds(value: str, flag: str) -> float:
    """``value`` as a positive number of seconds, or an error naming ``flag``."""
    try:
        seconds = float(value)
    except ValueError:
        raise ConfigurationError(flag, f"{value!r} is not a number of seconds") from None
    if seconds <= 0:
        raise ConfigurationError(flag, f"{value!r} must be positive")
    return seconds


def common_settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Validate the core's parsed arguments into :class:`CommonSettings` keyword arguments
    (a driver adds its own and builds its settings class from both).

    Raises:
        ConfigurationError: naming the flag that is wrong.
    """
    if not args.node_name:
        raise ConfigurationError("--node-name", "required (or set NODE_NAME)")
    port = parse_int(args.healthcheck_port, "--healthcheck-port")
    if port < -1 or port > 65535:
        raise ConfigurationError("--healthcheck-port", f"{port} is not a port (or -1)")
    if args.http_endpoint and ":" not in args.http_endpoint:
        raise ConfigurationError("--http-endpoint", f"{args.http_endpoint!r} is not host:port")
    insecure = str(args.metrics_insecure).lower()
    if insecure not in ("true", "false"):
        raise ConfigurationError("--metrics-insecure", f"{insecure!r} is not true or false")
    if bool(args.metrics_tls_cert_file) != bool(args.metrics_tls_key_file):
        raise ConfigurationError(
            "--metrics-tls-cert-file", "give it with --metrics-tls-key-file (both or neither)"
        )
    interval = parse_seconds(args.stale_claim_cleanup_interval, "--stale-claim-cleanup-interval")
    paths = {
        "--cdi-root": args.cdi_root,
        "--kubelet-registrar-directory-path": args.kubelet_registrar_directory_path,
        "--kubelet-plugins-directory-path": args.kubelet_plugins_directory_path,
    }
    # A driver whose flag table leaves the socket out never asks the kubelet.
    pod_resources = getattr(args, "kubelet_pod_resources_socket", "")
    if pod_resources:
        paths["--kubelet-pod-resources-socket"] = pod_resources
    for flag, value in paths.items():
        if not Path(value).is_absolute():
            raise ConfigurationError(flag, f"{value!r} must be an absolute path")
    return {
        "node_name": args.node_name,
        "cdi_root": Path(args.cdi_root),
        "registrar_dir": Path(args.kubelet_registrar_directory_path),
        "plugins_dir": Path(args.kubelet_plugins_directory_path),
        "healthcheck_port": port,
        "http_endpoint": args.http_endpoint,
        "metrics_path": "/" + args.metrics_path.strip("/"),
        "metrics_insecure": insecure == "true",
        "metrics_tls_cert_file": args.metrics_tls_cert_file,
        "metrics_tls_key_file": args.metrics_tls_key_file,
        "kubeconfig": args.kubeconfig,
        "verbosity": args.verbosity,
        "pod_uid": args.pod_uid,
        "claims_directory": Path(args.claims_directory) if args.claims_directory else None,
        "boot_id_file": Path(args.boot_id_file),
        "stale_claim_cleanup_interval_s": interval,
        "pod_resources_socket": Path(pod_resources) if pod_resources else None,
    }
