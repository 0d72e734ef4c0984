"""``dra-compute-domain-daemon run|check``: the domain daemon's entry point and its probe."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from .daemon_env import DaemonEnv
from .errors import DaemonEnvironmentError
from .imex_process import imex_commands, query_ready

__all__ = ["main"]


def _check(env: DaemonEnv) -> int:
    if not env.clique_id:
        return 0  # no fabric: nothing runs, and the daemon counts as ready
    ready = query_ready(imex_commands(env.imex_backend, env.config_path))
    print("READY" if ready else "NOT_READY")
    return 0 if ready else 1


def _run(env: DaemonEnv, kubeconfig: str | None) -> int:
    # Imported here: `check` (the probe, every second) must not pay for them.
    from dra_kube_client import KubeConfigError, KubeTransport  # deferred import

    from .daemon import DomainDaemon  # deferred import

    try:
        transport = KubeTransport.from_kubeconfig(kubeconfig)
    except KubeConfigError as exc:
        print(f"dra-compute-domain-daemon: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    DomainDaemon(env, transport).run(stop)
    transport.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run a subcommand; the environment carries every setting."""
    parser = argparse.ArgumentParser(prog="dra-compute-domain-daemon", description=__doc__)
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", ""))
    parser.add_argument(
        "-v", "--verbosity", type=int, default=int(os.environ.get("LOG_VERBOSITY", "1"))
    )
    parser.add_argument("command", choices=("run", "check"))
    args = parser.parse_args(argv)
    try:
        env = DaemonEnv.from_env(os.environ)
    except DaemonEnvironmentError as exc:
        print(f"dra-compute-domain-daemon: {exc}", file=sys.stderr)
        return 2
    if args.command == "check":
        return _check(env)
    from dra_kubelet_core.logs import configure_logging  # deferred import

    configure_logging(args.verbosity)
    logging.getLogger("dra_computedomain").setLevel(
        logging.DEBUG if args.verbosity >= 1 else logging.INFO
    )
    return _run(env, args.kubeconfig or None)
