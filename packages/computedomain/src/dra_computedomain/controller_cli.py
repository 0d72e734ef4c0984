"""``dra-compute-domain-controller``: the ComputeDomain controller (a Deployment).

Flags take their defaults from NVIDIA's environment variables, so the chart's Deployment
needs no arguments beyond the image.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from dra_api_types.nvidia_gates import parse_feature_gates
from dra_kube_client import KubeConfigError, KubeTransport, LeaderElector, LeaseTimings
from dra_kubelet_core.errors import ConfigurationError
from dra_kubelet_core.logs import configure_logging

from .controller import ComputeDomainController
from .gate_log import log_unbuilt_gates
from .host_imex import DRIVER_MANAGED, check_imex_mode
from .manifests import DaemonSettings
from .names import LEASE_NAME, MAX_NODES_PER_IMEX_DOMAIN

__all__ = ["build_parser", "lease_lock", "main"]

log = logging.getLogger(__name__)


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _duration(value: str) -> float:
    """``15s``, ``2m`` or plain seconds."""
    text = value.strip()
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0}
    for suffix in ("ms", "s", "m"):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale[suffix]
    return float(text)


def build_parser() -> argparse.ArgumentParser:
    """The controller's flags."""
    p = argparse.ArgumentParser(prog="dra-compute-domain-controller", description=__doc__)
    p.add_argument("--kubeconfig", default=_env("KUBECONFIG", ""))
    p.add_argument(
        "--namespace",
        default=_env("NAMESPACE", "default"),
        help="driver namespace: daemon DaemonSets, templates, cliques, the Lease",
    )
    p.add_argument(
        "--image-name",
        default=_env("IMAGE_NAME", ""),
        help="image of the domain daemon pods (required)",
    )
    p.add_argument("--image-pull-policy", default=_env("IMAGE_PULL_POLICY", "IfNotPresent"))
    p.add_argument(
        "--cd-daemon-image-pull-secret-names", default=_env("CD_DAEMON_IMAGE_PULL_SECRET_NAMES", "")
    )
    p.add_argument(
        "--log-verbosity-cd-daemon", type=int, default=int(_env("LOG_VERBOSITY_CD_DAEMON", "1"))
    )
    p.add_argument(
        "--max-nodes-per-imex-domain",
        type=int,
        default=int(_env("MAX_NODES_PER_IMEX_DOMAIN", str(MAX_NODES_PER_IMEX_DOMAIN))),
    )
    p.add_argument(
        "--imex-backend",
        choices=("real", "fake"),
        default=_env("IMEX_BACKEND", "real"),
        help="real: nvidia-imex; fake: this project's stand-in (fake GPU nodes)",
    )
    p.add_argument("--feature-gates", default=_env("FEATURE_GATES", ""), help="NVIDIA's gates")
    p.add_argument(
        "--imex-mode",
        default=_env("IMEX_MODE", DRIVER_MANAGED),
        help="driverManaged: a daemon DaemonSet per domain; hostManaged: the hosts run IMEX",
    )
    p.add_argument("--imex-isolation", default=_env("IMEX_ISOLATION", "domain"))
    p.add_argument("--pod-name", default=_env("POD_NAME", socket.gethostname()))
    p.add_argument(
        "--resync-period",
        type=_duration,
        default=_duration("30s"),
        help="every domain is reconciled again (from the caches) this often; changes at once",
    )
    p.add_argument(
        "--leader-election",
        "--leader-election-enabled",  # NVIDIA's name (and its LEADER_ELECTION_ENABLED)
        dest="leader_election",
        action="store_true",
        default=_env("LEADER_ELECTION_ENABLED", _env("LEADER_ELECTION", "false")).lower() == "true",
    )
    # NVIDIA's flags: its chart names the Lease `<chart name>-controller` in the release's
    # namespace, so a runbook (or NVIDIA's own leader-election test) finds it under that name.
    p.add_argument(
        "--leader-election-lease-lock-name",
        default=_env("LEADER_ELECTION_LEASE_LOCK_NAME", LEASE_NAME),
    )
    p.add_argument(
        "--leader-election-lease-lock-namespace",
        default=_env("LEADER_ELECTION_LEASE_LOCK_NAMESPACE", ""),
        help="default: --namespace (the driver namespace, where the chart's Role grants Leases)",
    )
    p.add_argument("--leader-election-lease-duration", type=_duration, default=15.0)
    p.add_argument("--leader-election-renew-deadline", type=_duration, default=10.0)
    p.add_argument("--leader-election-retry-period", type=_duration, default=2.0)
    p.add_argument("-v", "--verbosity", type=int, default=int(_env("LOG_VERBOSITY", "1")))
    return p


def lease_lock(args: argparse.Namespace) -> tuple[str, str]:
    """``(namespace, name)`` of the Lease the replicas compete for."""
    return (
        args.leader_election_lease_lock_namespace or args.namespace,
        args.leader_election_lease_lock_name,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the controller until SIGTERM."""
    args = build_parser().parse_args(argv)
    configure_logging(args.verbosity)
    logging.getLogger("dra_computedomain").setLevel(
        logging.DEBUG if args.verbosity >= 1 else logging.INFO
    )
    if not args.image_name:
        print(
            "dra-compute-domain-controller: --image-name (IMAGE_NAME) is required", file=sys.stderr
        )
        return 2
    try:
        gates, _ = parse_feature_gates(args.feature_gates)
        host_managed = check_imex_mode(args.imex_mode, args.imex_isolation, gates)
        # Checked up front: timings under which a leader could outlive its Lease are an error.
        timings = (
            LeaseTimings(
                args.leader_election_lease_duration,
                args.leader_election_renew_deadline,
                args.leader_election_retry_period,
            )
            if args.leader_election
            else None
        )
        transport = KubeTransport.from_kubeconfig(args.kubeconfig or None)
    except (ConfigurationError, KubeConfigError, ValueError) as exc:
        print(f"dra-compute-domain-controller: {exc}", file=sys.stderr)
        return 2
    log_unbuilt_gates(args.feature_gates, log)
    secrets = tuple(s for s in args.cd_daemon_image_pull_secret_names.split(",") if s)
    settings = DaemonSettings(
        namespace=args.namespace,
        image=args.image_name,
        image_pull_policy=args.image_pull_policy,
        image_pull_secrets=secrets,
        max_nodes_per_imex_domain=args.max_nodes_per_imex_domain,
        log_verbosity=args.log_verbosity_cd_daemon,
        imex_backend=args.imex_backend,
        host_managed_imex=host_managed,
    )
    stop = threading.Event()

    controller = ComputeDomainController(transport, settings)

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()  # the loop notices within a second

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log.info(
        "starting",
        extra={
            "event": "start",
            "namespace": args.namespace,
            "leader_election": args.leader_election,
            # NVIDIA logs its configuration at every verbosity, 0 included.
            "verbosity": args.verbosity,
            "max_nodes_per_imex_domain": args.max_nodes_per_imex_domain,
            "lease": "/".join(lease_lock(args)) if args.leader_election else "",
        },
    )
    if args.leader_election:
        lease_namespace, lease_name = lease_lock(args)
        elector = LeaderElector(
            transport,
            namespace=lease_namespace,
            name=lease_name,
            identity=args.pod_name,
            timings=timings,
        )
        threading.Thread(target=elector.run, args=(stop,), name="leader", daemon=True).start()
        controller.run(stop, interval_s=args.resync_period, is_leader=elector.is_leader)
    else:
        controller.run(stop, interval_s=args.resync_period)
    transport.close()
    return 0
