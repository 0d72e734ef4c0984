"""``dra-allocation-controller``: informers, metrics, Events for unschedulable pods."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
from collections.abc import Sequence
from types import FrameType

from dra_allocator.features import Features
from dra_kube_client import (
    DelegatedAuth,
    KubeConfigError,
    KubeTransport,
    LeaderElector,
    LeaseTimings,
    ServingSecurity,
    TlsFilesError,
)
from dra_kube_client.informers.shared import SharedInformers

from ..metrics_http import serve
from . import logs
from .caches import CONTROLLER_RESOURCES
from .controller import AllocationController, Settings
from .events import EventPublisher, TokenBucket
from .metrics import ControllerMetrics
from .plugin_placement import PlacementChecker, PlacementWatch

log = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dra-allocation-controller",
        description="Watches DRA objects; exports claim and device metrics; explains "
        "unschedulable pods with DRAUnsatisfiable Events.",
    )
    env = os.environ.get
    p.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="default: in-cluster")
    p.add_argument(
        "--http-address",
        default=env("HTTP_ADDRESS", "0.0.0.0:8080"),
        help="HOST:PORT of /healthz, /readyz and /metrics (default 0.0.0.0:8080)",
    )
    p.add_argument(
        "--metrics-insecure",
        default=env("METRICS_INSECURE", "false"),
        choices=["true", "false"],
        help="true: plain HTTP, /metrics to anyone; false (default): HTTPS, /metrics only to "
        "bearer tokens the API server authenticates (TokenReview) and allows to get /metrics "
        "(SubjectAccessReview)",
    )
    p.add_argument(
        "--metrics-tls-cert-file",
        default=env("METRICS_TLS_CERT_FILE", ""),
        help="PEM certificate of the HTTPS port; empty: self-signed at start",
    )
    p.add_argument(
        "--metrics-tls-key-file",
        default=env("METRICS_TLS_KEY_FILE", ""),
        help="PEM key of --metrics-tls-cert-file",
    )
    p.add_argument("--leader-elect", default=env("LEADER_ELECT", "true"), choices=["true", "false"])
    p.add_argument("--lease-namespace", default=env("POD_NAMESPACE", "default"))
    p.add_argument("--lease-name", default=env("LEASE_NAME", "dra-allocation-controller"))
    p.add_argument("--identity", default=env("POD_NAME") or socket.gethostname())
    p.add_argument(
        "--resync-period",
        type=float,
        default=float(env("RESYNC_PERIOD", "30")),
        help="seconds between full reconciles without changes (default 30)",
    )
    p.add_argument(
        "--event-repeat",
        type=float,
        default=float(env("EVENT_REPEAT", "600")),
        help="seconds before the same Event is posted again (default 600)",
    )
    p.add_argument("--events-per-second", type=float, default=float(env("EVENTS_PER_SECOND", "5")))
    p.add_argument(
        "--events",
        default=env("EVENTS", "true"),
        choices=["true", "false"],
        help="post DRAUnsatisfiable Events (default true)",
    )
    p.add_argument(
        "--kubelet-plugin-daemonsets",
        default=env("KUBELET_PLUGIN_DAEMONSETS", ""),
        help="NAMESPACE/NAME,...: DaemonSets to warn about (log line and Warning Event) when "
        "scheduled on no node for longer than --placement-grace-period (default: none)",
    )
    p.add_argument(
        "--placement-grace-period",
        type=float,
        default=float(env("PLACEMENT_GRACE_PERIOD", "300")),
        help="seconds a DaemonSet may want no pod before the warning (default 300)",
    )
    p.add_argument("-v", "--verbosity", type=int, default=int(env("VERBOSITY", "0")))
    return p


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "0.0.0.0", int(port)


def parse_daemonsets(text: str) -> list[tuple[str, str]]:
    """``NAMESPACE/NAME,...`` as pairs; raises ValueError naming the flag."""
    pairs: list[tuple[str, str]] = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        namespace, _, name = item.partition("/")
        if not namespace or not name or "/" in name:
            raise ValueError(f"--kubelet-plugin-daemonsets: {item!r} is not NAMESPACE/NAME")
        pairs.append((namespace, name))
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    """Run until SIGTERM/SIGINT."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        daemonsets = parse_daemonsets(args.kubelet_plugin_daemonsets)
    except ValueError as exc:
        parser.error(str(exc))
    logs.setup(args.verbosity)
    try:
        transport = KubeTransport.from_kubeconfig(args.kubeconfig, fallback=True)
    except KubeConfigError as exc:
        log.error(str(exc), extra={"event": "config_error"})
        return 2
    stop = threading.Event()

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # Objects are read (and unreadable ones skipped, logged) once, by the controller's view;
    # the caches keep only what it reads (caches.py: most of the controller's memory).
    informers = SharedInformers(transport, resources=CONTROLLER_RESOURCES)
    metrics = ControllerMetrics(
        lambda: {k: (len(i.store), i.stats) for k, i in informers.informers.items()}
    )
    elector: LeaderElector | None = None
    if args.leader_elect == "true":
        elector = LeaderElector(
            transport,
            namespace=args.lease_namespace,
            name=args.lease_name,
            identity=args.identity,
            # client-go's defaults (lease 15 s, renew deadline 10 s, retry 2 s): a leader that
            # cannot renew for 10 s stops leading 5 s before another candidate may take over.
            timings=LeaseTimings(),
            on_change=lambda leading: metrics.leader.set(1 if leading else 0),
        )
    else:
        metrics.leader.set(1)
    publisher = None
    if args.events == "true":
        publisher = EventPublisher(
            transport,
            instance=args.identity,
            repeat_s=args.event_repeat,
            bucket=TokenBucket(rate_per_s=args.events_per_second, burst=20),
            on_outcome=lambda reason, outcome: metrics.events.labels(reason, outcome).inc(),
        )
    controller = AllocationController(
        {kind: informers.store(kind) for kind in informers.informers},
        metrics=metrics,
        publisher=publisher,
        is_leader=(lambda: elector.leading) if elector is not None else (lambda: True),
        features=Features(),
        settings=Settings(resync_s=args.resync_period),
    )
    address = _address(args.http_address)
    insecure = args.metrics_insecure == "true"
    try:
        security = ServingSecurity(
            insecure=insecure,
            cert_file=args.metrics_tls_cert_file,
            key_file=args.metrics_tls_key_file,
        )
        tls = security.tls_context(address[0])
    except TlsFilesError as exc:
        log.error(str(exc), extra={"event": "config_error"})
        return 2
    server = serve(
        address,
        registry=metrics.exposition,
        ready=lambda: informers.synced() and controller.reconciled.is_set(),
        tls=tls,
        auth=None if insecure else DelegatedAuth(transport),
    )
    log.info(
        f"serving on {'http' if insecure else 'https'}://{args.http_address}",
        extra={"event": "started", "identity": args.identity, "leader_elect": args.leader_elect},
    )
    informers.start(stop)
    if elector is not None:
        threading.Thread(target=elector.run, args=(stop,), name="leader", daemon=True).start()
    worker = threading.Thread(
        target=controller.run, args=(stop,), kwargs={"ready": informers.synced}, daemon=True
    )
    worker.start()
    if daemonsets:
        placement = PlacementChecker(
            transport,
            daemonsets,
            watch=PlacementWatch(grace_s=args.placement_grace_period),
            publisher=publisher,
        )
        threading.Thread(
            target=placement.run,
            args=(stop,),
            kwargs={"every_s": args.resync_period, "is_leader": controller.is_leader},
            name="placement",
            daemon=True,
        ).start()
    stop.wait()
    server.shutdown()
    log.info("stopped", extra={"event": "stopped"})
    return 0
