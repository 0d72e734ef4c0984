"""``dra-webhook``: the validating admission webhook's command line. Only wiring here.

Flags follow NVIDIA's webhook binary (``--tls-cert-file``, ``--tls-private-key-file``,
``--port``, ``--feature-gates`` with its environment twin ``FEATURE_GATES``), so the same
Deployment arguments work with either image. The feature gates are the driver's (the table
and semantics of :mod:`dra_api_types.nvidia_gates`, the kubelet plugin's): the sharing
gates decide which configs are admitted. The certificate and key are watched and reloaded
when they change (``--tls-reload-interval``). ``--metrics-port`` (this project's, off by
default) serves the webhook's own review latency (:mod:`.metrics`) in plain HTTP, with the
allocation controller's serving code (:mod:`dra_controller.metrics_http`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from dra_api_types.errors import FeatureGateError
from dra_api_types.nvidia_gates import parse_feature_gates

from ..metrics_http import serve
from .admission import SHARING_GATES
from .metrics import REVIEW_SECONDS, ReviewMetrics
from .server import READYZ_PATH, VALIDATE_PATH, WebhookServer
from .tls import CertificateLoadError, ReloadingCertificate
from .warmup import warm_up

#: The endpoint change reaches the API server within a few seconds; the rest is margin.
DEFAULT_SHUTDOWN_DELAY_S = 15.0

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dra-webhook",
        description="Validating admission webhook for the opaque configs "
        f"(resource.nvidia.com/v1beta1) of ResourceClaims and ResourceClaimTemplates: "
        f"POST {VALIDATE_PATH}, GET {READYZ_PATH}.",
    )
    parser.add_argument(
        "--tls-cert-file", type=Path, required=True, help="PEM certificate (chain) to serve"
    )
    parser.add_argument(
        "--tls-private-key-file", type=Path, required=True, help="PEM key of --tls-cert-file"
    )
    parser.add_argument("--port", type=int, default=443, help="HTTPS port (default 443)")
    parser.add_argument(
        "--tls-reload-interval",
        type=float,
        default=10.0,
        help="seconds between checks of the certificate and key files; a changed pair is "
        "loaded for new connections without a restart (default 10)",
    )
    parser.add_argument(
        "--feature-gates",
        default=os.environ.get("FEATURE_GATES", ""),
        help="comma-separated Gate=true|false, the driver's gates (env FEATURE_GATES; the "
        "chart passes the plugin's): a TimeSlicing config needs TimeSlicingSettings=true, "
        "an MPS config MPSSupport=true (default: NVIDIA's defaults, both off)",
    )
    parser.add_argument(
        "--bind-address", default="0.0.0.0", help="address to listen on (default 0.0.0.0)"
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        help=f"plain-HTTP port of /metrics ({REVIEW_SECONDS}: each review's time in the "
        "webhook, by kind and outcome), /healthz and /readyz, on --bind-address "
        "(default 0: not served)",
    )
    parser.add_argument(
        "--shutdown-delay",
        type=float,
        default=DEFAULT_SHUTDOWN_DELAY_S,
        help=(
            "seconds to keep serving after SIGTERM while readiness fails and connections are "
            "closed after each response, so the API server moves to the other replicas "
            f"without a refused review (default {DEFAULT_SHUTDOWN_DELAY_S:g}; keep the pod's "
            "terminationGracePeriodSeconds above it)"
        ),
    )
    parser.add_argument(
        "-v", "--v", dest="verbosity", type=int, default=0, help="log verbosity (1+: debug)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM or SIGINT; exit 2 on bad flags or unreadable certificates."""
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbosity >= 1 else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not 0 < args.port < 65536:
        parser.error(f"--port: {args.port} is not a TCP port (1-65535)")
    if not 0 <= args.metrics_port < 65536:
        parser.error(f"--metrics-port: {args.metrics_port} is not a TCP port (1-65535, 0: off)")
    if args.metrics_port == args.port:
        parser.error(f"--metrics-port: {args.metrics_port} is --port's too")
    if not args.shutdown_delay >= 0:
        parser.error(f"--shutdown-delay: {args.shutdown_delay} is not >= 0 seconds")
    if not args.tls_reload_interval > 0:
        parser.error(f"--tls-reload-interval: {args.tls_reload_interval} is not > 0 seconds")
    try:
        gates, _ = parse_feature_gates(args.feature_gates)
    except FeatureGateError as exc:
        parser.error(str(exc))
    try:
        certificate = ReloadingCertificate(args.tls_cert_file, args.tls_private_key_file)
    except CertificateLoadError as exc:
        parser.error(
            f"--tls-cert-file {args.tls_cert_file} / --tls-private-key-file "
            f"{args.tls_private_key_file}: cannot load: {exc.reason}"
        )
    # Before the port is bound: the pod turns Ready only once the first review is as fast
    # as the others (see .warmup).
    started = time.monotonic()
    samples = warm_up(gates)
    logging.getLogger(__name__).info(
        "warmed up: %d sample reviews in %.3fs", samples, time.monotonic() - started
    )
    metrics = ReviewMetrics() if args.metrics_port else None
    try:
        server = WebhookServer(
            (args.bind_address, args.port), tls=certificate, gates=gates, metrics=metrics
        )
    except OSError as exc:
        print(
            f"dra-webhook: cannot listen on {args.bind_address}:{args.port}: {exc}", file=sys.stderr
        )
        return 1
    metrics_server = None
    if metrics is not None:
        try:
            metrics_server = serve(
                (args.bind_address, args.metrics_port),
                registry=metrics.registry,
                ready=lambda: not server.draining.is_set(),
                not_ready=b"draining\n",
            )
        except OSError as exc:
            server.server_close()
            print(
                f"dra-webhook: cannot listen on {args.bind_address}:{args.metrics_port} "
                f"(--metrics-port): {exc}",
                file=sys.stderr,
            )
            return 1
        logging.getLogger(__name__).info(
            "serving /metrics on http://%s:%d", args.bind_address, args.metrics_port
        )

    def drain_then_shutdown() -> None:
        server.begin_drain()
        logging.getLogger(__name__).info("draining for %.1fs before shutdown", args.shutdown_delay)
        time.sleep(args.shutdown_delay)
        server.shutdown()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        # shutdown() waits for serve_forever() to return: call it off the serving thread.
        threading.Thread(target=drain_then_shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    sharing = {gate: gates[gate] for gate in SHARING_GATES.values()}
    logging.getLogger(__name__).info(
        "serving %s and %s on https://%s:%d; sharing gates %s",
        VALIDATE_PATH,
        READYZ_PATH,
        args.bind_address,
        server.port,
        ", ".join(f"{gate}={str(on).lower()}" for gate, on in sharing.items()),
    )
    stop_watching = threading.Event()
    watcher = threading.Thread(
        target=certificate.watch,
        args=(stop_watching,),
        kwargs={"interval": args.tls_reload_interval},
        name="certificate-watch",
        daemon=True,
    )
    watcher.start()
    try:
        with server:
            server.serve_forever()
    finally:
        stop_watching.set()
        watcher.join()
        if metrics_server is not None:
            metrics_server.shutdown()
    return 0
