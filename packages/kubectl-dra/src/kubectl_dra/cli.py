"""``kubectl dra``: the kubectl plugin (console script ``kubectl-dra``). Only wiring here:
the flags, then :mod:`kubectl_dra.commands`, imported once they are parsed."""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import sys
from collections.abc import Iterator, Sequence

from dra_allocator.features import KUBE_MINORS

from .cluster_lists import ClusterLists, LiveClusterError, start_lists
from .parser import Command, add_files, add_output, build_parser, with_defaults

DESCRIPTION = (
    "Dynamic Resource Allocation tools: allocate offline, explain pending claims, validate "
    "and migrate manifests. Installed as kubectl-dra on PATH, kubectl finds it as a plugin: "
    "kubectl dra COMMAND."
)
EPILOG = """examples:
  kubectl dra validate -f manifests/
  kubectl dra allocate -f cluster/ -f claims.yaml -o json
  kubectl dra explain pod/trainer -n team-a
  kubectl dra migrate -f classic.yaml > migrated.yaml

'kubectl dra COMMAND --help' shows each command's flags and examples."""


def _allocate_arguments(alloc: argparse.ArgumentParser) -> None:
    add_files(
        alloc,
        required=True,
        help_text="manifests (DeviceClasses, ResourceSlices, ResourceClaims, Nodes, Pods)",
    )
    alloc.add_argument(
        "--node", help="allocate on this node (default: first that fits, nodes in name order)"
    )
    alloc.add_argument(
        "--claim",
        action="append",
        nargs="+",
        metavar="[NS/]NAME",
        help="claims to allocate together (default: every unallocated claim); "
        "a NAME without NS/ is in -n's namespace",
    )
    _add_gates(alloc, "feature gates that are on (default: all DRA features)")
    add_output(alloc, ["yaml", "json", "wide"], "yaml")


def _explain_arguments(expl: argparse.ArgumentParser) -> None:
    expl.add_argument("target", nargs="?", metavar="pod/NAME|resourceclaim/NAME")
    add_files(
        expl, required=False, help_text="explain offline from manifests, not the live cluster"
    )
    expl.add_argument("--node", help="only this node")
    _add_gates(expl, "feature gates that are on (default: all DRA features)")


def _validate_arguments(val: argparse.ArgumentParser) -> None:
    add_files(val, required=True, help_text="manifests to check")
    _add_gates(
        val,
        "the API server's DRA gates (listed on, others off; default: the release's): "
        "DRAConsumableCapacity and DRAListTypeAttributes shape its CEL environment",
    )
    add_output(val, ["json", "yaml", "wide"], None)


def _migrate_arguments(mig: argparse.ArgumentParser) -> None:
    add_files(mig, required=True, help_text="classic DRA or device-plugin manifests")
    add_output(mig, ["yaml", "json", "wide"], "yaml")
    mig.add_argument(
        "--to-claims",
        action="store_true",
        help="rewrite device-plugin requests (nvidia.com/gpu: N) to ResourceClaimTemplates "
        "instead of leaving them to the scheduler's extended-resource mapping",
    )


def _add_gates(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--features", default=None, metavar="GATE[,GATE=false...]", help=help_text)
    parser.add_argument(
        "--kube-version",
        default=None,
        metavar="1.MINOR",
        help="reproduce this Kubernetes release where releases differ "
        f"(known: {', '.join(f'1.{m}' for m in KUBE_MINORS)}; default: the newest)",
    )


def _classes_arguments(classes: argparse.ArgumentParser) -> None:
    add_output(classes, ["yaml", "json", "wide"], "yaml")


COMMANDS = [
    Command(
        "allocate",
        "allocate claims offline, like the kube-scheduler",
        "  kubectl dra allocate -f cluster/ -f claims.yaml -o json\n"
        "  kubectl dra allocate -f cluster.yaml -f claims.yaml --claim team-a/h100 --node node-b\n"
        "  kubectl dra allocate -f cluster.yaml --claim h100 -n team-a --kube-version 1.36\n"
        "  kubectl dra allocate -f cluster/ -f claims.yaml -o wide       # node, device, product",
        _allocate_arguments,
    ),
    Command(
        "explain",
        "why a pod's or claim's devices cannot be allocated (exit 1 when nothing fits)",
        "  kubectl dra explain pod/trainer -n team-a                 # live cluster\n"
        "  kubectl dra explain pod/trainer -n team-a --context prod --kubeconfig ~/.kube/prod\n"
        "  kubectl dra explain resourceclaim/h100 -n team-a -f cluster.yaml -f claims.yaml",
        _explain_arguments,
    ),
    Command(
        "validate",
        "check manifests as the API server would: schema, CEL, opaque configs",
        "  kubectl dra validate -f manifests/\n"
        "  kubectl dra validate -f claim.yaml -o json\n"
        "  kubectl dra validate -f manifests/ -o wide\n"
        "  kubectl get resourceclaims -A -o yaml | kubectl dra validate -f -",
        _validate_arguments,
    ),
    Command(
        "migrate",
        "classic DRA and device-plugin manifests to resource.k8s.io/v1 (notes on stderr)",
        "  kubectl dra migrate -f classic.yaml > migrated.yaml\n"
        "  kubectl dra migrate -f deployments/ --to-claims -o json\n"
        "  kubectl dra migrate -f classic.yaml -o wide                     # what it writes",
        _migrate_arguments,
    ),
    Command(
        "classes",
        "the DeviceClasses this driver's chart installs (used offline when the input has "
        "none of that name)",
        "  kubectl dra classes\n  kubectl dra classes -o json\n  kubectl dra classes -o wide",
        _classes_arguments,
    ),
]


def _configure_logging(verbosity: int) -> None:
    """Errors only by default; the client's retry warnings (urllib3) only from ``-v 4``."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity < 4 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("urllib3").setLevel(logging.DEBUG if verbosity >= 4 else logging.CRITICAL)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kubectl-dra``; returns the exit code."""
    args = with_defaults(
        build_parser(COMMANDS, description=DESCRIPTION, epilog=EPILOG).parse_args(argv)
    )
    _configure_logging(args.verbosity)
    lists = _early_lists(args)
    # The allocator, the models and the CEL compiler take ~0.4 s to import here and ~1 s on
    # a loaded host: a live explain's lists are already asked for while they load.
    from .commands import run_command  # deferred import

    with without_cycle_collection():
        return run_command(args, lists)


def _early_lists(args: argparse.Namespace) -> ClusterLists | None:
    """The cluster's lists, asked for now when the command is a live explain of a target.

    A kubeconfig that cannot be used is left to the command, which reports it as usual.
    """
    if args.command != "explain" or args.filename or args.target is None:
        return None
    try:
        return start_lists(kubeconfig=args.kubeconfig, context=args.context)
    except LiveClusterError:
        return None


@contextlib.contextmanager
def without_cycle_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while one command runs, then as it was.

    A command builds every object of its input at once and keeps them to the end (a live
    explain at 1,000 nodes: ~5 million), so each collection rescans a growing heap and finds
    nothing to free: ~70 % of explain's time there (docs/scale.md). Reference counting still
    frees everything acyclic, and the process ends with the command.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def console_main() -> int:
    """Entry point of the ``kubectl-dra`` console script: :func:`main`, for a process that
    ends with it.

    What the command built is left to the process's end, not collected: the interpreter
    collects once more as it exits, and at 1,000 nodes that pass over a live explain's
    objects cost ~0.3 CPU s and freed nothing the exit would not.
    """
    gc.disable()
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(console_main())
