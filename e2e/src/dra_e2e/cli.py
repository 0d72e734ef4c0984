"""``e2e-cluster``: bring a local Kubernetes cluster up, inspect it, tear it down.

    e2e-cluster up [--nodes N] [--kwok-nodes M]   build binaries if needed, start N nodes
                                           (default 1) and M simulated GPU nodes (kwok, with
                                           the plugin's slices), wait until all are Ready
    e2e-cluster down [--state-dir DIR]     stop everything started, delete the state
    e2e-cluster status [--state-dir DIR]   JSON: processes, API readiness, nodes
    e2e-cluster kubeconfig [--state-dir DIR]   print the admin kubeconfig path
    e2e-cluster logs [COMPONENT] [--lines N]   tail of one or every component log
    e2e-cluster add-node                   start one more kubelet node
    e2e-cluster add-kwok-nodes M           create M more simulated GPU nodes (kwok)
    e2e-cluster install-driver [--set KEY=VALUE ...] [--values FILE ...]   build and import the
                                           driver images, helm upgrade --install the chart on
                                           fake GPUs, wait until every node runs the plugin
    e2e-cluster restart-kubelet --node NAME [--graceful]   kill a kubelet (SIGKILL) and restart it
    e2e-cluster import-image ARCHIVE [--node NAME]   import an OCI/Docker archive
    e2e-cluster build                      only build/refresh the binary cache
    e2e-cluster list                       clusters on this machine (e.g. leaked by a crash)
    e2e-cluster preflight [--install] [--for cluster|e2e|test]   check the host's tools (and
                                           apt-get install the missing ones) in seconds

The state directory defaults to $DRA_E2E_STATE_DIR or /tmp/dra-e2e-cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from dra_e2e import driver_install, hostnet, kwok_cluster, preflight
from dra_e2e.build import ensure_binaries
from dra_e2e.cluster import Cluster
from dra_e2e.cluster_view import DEFAULT_STATE_DIR
from dra_e2e.errors import E2EError
from dra_e2e.kwok import MAX_KWOK_NODES
from dra_e2e.prerequisites import Purpose
from dra_e2e.process import is_running, tail
from dra_e2e.versions import KUBERNETES_VERSION, KUBERNETES_VERSIONS, resolve_kube_version


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _node_count(text: str) -> int:
    """``--nodes``: an integer from 1 to the harness's node limit."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 1 <= count <= hostnet.MAX_NODES:
        raise argparse.ArgumentTypeError(f"{count} is not between 1 and {hostnet.MAX_NODES}")
    return count


def _kwok_count(text: str) -> int:
    """``--kwok-nodes``: an integer from 0 to kwok's node limit."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= count <= MAX_KWOK_NODES:
        raise argparse.ArgumentTypeError(f"{count} is not between 0 and {MAX_KWOK_NODES}")
    return count


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="e2e-cluster", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=Path(os.environ.get("DRA_E2E_STATE_DIR", str(DEFAULT_STATE_DIR))),
        help="cluster state directory (default: $DRA_E2E_STATE_DIR or %(default)s)",
    )
    parser.add_argument(
        "--kube-version",
        default=os.environ.get("DRA_E2E_KUBE_VERSION", ""),
        help=(
            "Kubernetes version for build/up, e.g. 1.36 or v1.36.5; one of "
            f"{', '.join(KUBERNETES_VERSIONS)} (default: $DRA_E2E_KUBE_VERSION, else "
            f"{KUBERNETES_VERSION}; other commands use the running cluster's)"
        ),
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the cluster and wait until its nodes are Ready")
    up.add_argument(
        "--nodes",
        type=_node_count,
        default=1,
        help=f"how many kubelet nodes to start, 1 to {hostnet.MAX_NODES} (default %(default)s)",
    )
    up.add_argument(
        "--kwok-nodes",
        type=_kwok_count,
        default=0,
        help="simulated GPU nodes (kwok) to add, each with the GPU plugin's ResourceSlices "
        "of its fleet (GB200, H100, MIG A100 in turn) (default %(default)s)",
    )
    sub.add_parser("down", help="stop every process the cluster started and remove its state")
    sub.add_parser("status", help="print the cluster status as JSON")
    sub.add_parser("kubeconfig", help="print the path of the admin kubeconfig")
    logs = sub.add_parser("logs", help="print component logs")
    logs.add_argument("component", nargs="?", help="e.g. kube-apiserver, kubelet-e2e-node-0")
    logs.add_argument("--lines", type=int, default=50, help="lines per log (0: whole file)")
    sub.add_parser("add-node", help="start one more kubelet node")
    add_kwok = sub.add_parser("add-kwok-nodes", help="create more simulated GPU nodes (kwok)")
    add_kwok.add_argument("count", type=_kwok_count)
    install = sub.add_parser(
        "install-driver",
        help="build and import the driver images, install (or upgrade) the chart on fake GPUs, "
        "wait until the plugin is Ready and has published slices on every node",
    )
    install.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a chart value, as helm --set takes it (repeatable; wins over --values)",
    )
    install.add_argument(
        "--values",
        dest="values_files",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="a values file, as helm --values takes it (repeatable)",
    )
    restart = sub.add_parser(
        "restart-kubelet", help="kill a node's kubelet and start it again; wait until Ready"
    )
    restart.add_argument("--node", required=True, help="node name, e.g. e2e-node-0")
    restart.add_argument(
        "--graceful", action="store_true", help="SIGTERM instead of SIGKILL (a crash)"
    )
    imp = sub.add_parser("import-image", help="import an OCI/Docker image archive")
    imp.add_argument("archive", type=Path)
    imp.add_argument("--node", help="only this node (default: every node)")
    sub.add_parser("build", help="build the pinned binaries into the cache")
    sub.add_parser("list", help="list the clusters on this machine and whether they run")
    check = sub.add_parser(
        "preflight", help="check root, Linux, Go and the host tools before any long build"
    )
    check.add_argument(
        "--install", action="store_true", help="first apt-get install the missing Debian packages"
    )
    check.add_argument(
        "--for",
        dest="purpose",
        choices=[p.name.lower() for p in Purpose],
        default="cluster",
        help="cluster: `up`; e2e: the demo and the e2e suites; test: every suite",
    )
    return parser


def run(argv: list[str]) -> int:
    """Execute one CLI command; returns the exit status."""
    args = _parser().parse_args(argv)
    kube_version = resolve_kube_version(args.kube_version) if args.kube_version else None
    cluster = Cluster(args.state_dir, kube_version=kube_version)
    if args.command == "preflight":
        purpose = Purpose[args.purpose.upper()]
        if args.install:
            preflight.install_missing(purpose, progress=_progress)
        preflight.check(purpose)
        _progress(f"[dra-e2e] host ready for {args.purpose}: root, Linux, Go and every tool")
    elif args.command == "build":
        bins = ensure_binaries(progress=_progress, kube_version=cluster.kube_version)
        print(bins.kube_dir)
        print(bins.etcd_dir)
        print(bins.containerd_dir)
    elif args.command == "up":
        cluster.up(progress=_progress, nodes=args.nodes, kwok_nodes=args.kwok_nodes)
        print(cluster.kubeconfig)
    elif args.command == "down":
        leftovers = cluster.down(progress=_progress)
        return 1 if leftovers else 0
    elif args.command == "status":
        status = cluster.status()
        print(json.dumps(status, indent=2))
        healthy = status["apiserver_ready"] and all(n["ready"] for n in status["nodes"].values())
        return 0 if healthy else 1
    elif args.command == "kubeconfig":
        if not cluster.exists():
            raise E2EError(f"no cluster in {cluster.state_dir}")
        print(cluster.kubeconfig)
    elif args.command == "logs":
        for record in cluster.processes():
            if args.component and record.name != args.component:
                continue
            print(f"===== {record.name}: {record.log}")
            if args.lines == 0:
                print(Path(record.log).read_text(errors="replace"), end="")
            else:
                print(tail(record.log, lines=args.lines), end="")
    elif args.command == "list":
        for slot, state_dir in sorted(hostnet.slot_owners().items()):
            other = Cluster(state_dir)
            if not other.exists():
                print(f"slot {slot}\t{state_dir}\t(no state)")
                continue
            running = sum(is_running(p) for p in other.processes())
            print(f"slot {slot}\t{state_dir}\t{running}/{len(other.processes())} processes")
    elif args.command == "add-node":
        node = cluster.add_node(progress=_progress)
        print(node.name)
    elif args.command == "add-kwok-nodes":
        for name in kwok_cluster.add_kwok_nodes(cluster, args.count, progress=_progress):
            print(name)
    elif args.command == "install-driver":
        sets = driver_install.parse_sets(args.sets)
        if not cluster.exists():
            raise E2EError(f"no cluster in {cluster.state_dir} (run up first)")
        installed = driver_install.install_driver(
            cluster,
            sets=sets,
            values_files=args.values_files,
            progress=_progress,
        )
        print(f"{installed.namespace}/{installed.release}")
    elif args.command == "restart-kubelet":
        sig = signal.SIGTERM if args.graceful else signal.SIGKILL
        record = cluster.restart_kubelet(args.node, sig=sig, progress=_progress)
        print(record.pid)
    elif args.command == "import-image":
        for ref in cluster.import_image(args.archive, node=args.node):
            print(ref)
    return 0


def main() -> None:
    """Console-script entry point."""
    try:
        sys.exit(run(sys.argv[1:]))
    except E2EError as exc:
        print(f"e2e-cluster: {exc}", file=sys.stderr)
        sys.exit(1)
