"""``kubectl dra``: the kubectl plugin (console script ``kubectl-dra``). Only wiring here."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import yaml
from dra_allocator.cel_engine import CelEngine
from dra_allocator.errors import AllocationError
from dra_allocator.explain_report import (
    ExplainTarget,
    Explanation,
    explain,
    explain_pod,
    needs_pod_explain,
    parse_target,
    target_claims,
    target_pod,
)
from dra_allocator.features import KUBE_MINORS, Features
from dra_allocator.inputs import InputError, read_documents, read_sources
from dra_allocator.pod_placement import PodPlacement
from dra_allocator.snapshot import Snapshot, add_driver_classes, build_snapshot
from dra_api_types.codec import dump_all
from dra_api_types.driver_classes import driver_device_classes

from .allocate_report import EXIT_ERROR, run_allocate
from .findings import findings_report
from .gates import cel_environment, features_from_flags
from .live import LiveClusterError, fetch_documents
from .migrate import migrate_documents
from .parser import (
    Command,
    add_files,
    add_output,
    build_parser,
    files_of,
    namespace_of,
    reclaim_positional,
    with_defaults,
)
from .validation import check_selector, validate_documents
from .wide import allocate_table, classes_table, findings_table, objects_table

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FINDINGS = 1

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


def _dump(report: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(report, indent=2) + "\n"
    return yaml.safe_dump(report, sort_keys=False, default_flow_style=False)


def _offline_snapshot(files: Sequence[str]) -> Snapshot:
    """The snapshot of the files, with the chart's DeviceClasses the input lacks."""
    snapshot = build_snapshot(read_documents(files))
    add_driver_classes(snapshot)
    return snapshot


def _write_notes(snapshot: Snapshot) -> None:
    # What the input did not say (made-up names, chart classes): stdout stays the report.
    for note in snapshot.notes:
        sys.stderr.write(f"note: {note}\n")


def _cmd_allocate(args: argparse.Namespace) -> int:
    snapshot = _offline_snapshot(files_of(args))
    _write_notes(snapshot)
    namespace = namespace_of(args)
    keys = [k if "/" in k else f"{namespace}/{k}" for group in args.claim or [] for k in group]
    result = run_allocate(
        snapshot,
        engine=CelEngine(),
        features=features_from_flags(args.features, args.kube_version),
        node=args.node,
        claim_keys=keys,
    )
    if args.output == "wide":
        sys.stdout.write(allocate_table(result.report, snapshot).render())
    else:
        sys.stdout.write(_dump(result.report, args.output))
    return result.exit_code


def _looks_like_target(value: str) -> bool:
    try:
        parse_target(value, "default")
    except AllocationError:
        return False
    return True


def _cmd_explain(args: argparse.Namespace) -> int:
    reclaim_positional(args, "target", _looks_like_target)
    if args.target is None:
        raise AllocationError("missing: give pod/NAME or resourceclaim/NAME", field="TARGET")
    target = parse_target(args.target, namespace_of(args))
    # Where the time goes, logged at -v 1: the scale benchmark splits explain's wall time
    # into the cluster's lists, reading them and the explanation (docs/scale.md).
    started = time.perf_counter()
    fetched = started
    if args.filename:
        snapshot = _offline_snapshot(files_of(args))
    else:
        documents = fetch_documents(
            namespace=target.namespace,
            pod=target.pod_name,
            kubeconfig=args.kubeconfig,
            context=args.context,
        )
        fetched = time.perf_counter()
        snapshot = build_snapshot(documents)
    read = time.perf_counter()
    _write_notes(snapshot)
    features = features_from_flags(args.features, args.kube_version)
    report = explain_target(snapshot, target, features=features, node=args.node)
    sys.stdout.write(report.text)
    log.info(
        "explained target=%s fetch_s=%.3f read_s=%.3f explain_s=%.3f",
        args.target,
        fetched - started,
        read - fetched,
        time.perf_counter() - read,
    )
    return EXIT_OK if report.fits else EXIT_FINDINGS


def explain_target(
    snapshot: Snapshot, target: ExplainTarget, *, features: Features, node: str | None
) -> Explanation:
    """What ``kubectl dra explain`` says of ``target`` in ``snapshot``: a pod whose claims
    are not all made yet as a pod, anything else as its claims (with the pod's placement).

    Raises:
        AllocationError: the target is not in the snapshot, or an object cannot be read.
    """
    pod = target_pod(snapshot, target)
    if pod is not None and needs_pod_explain(snapshot, pod):
        return explain_pod(
            snapshot, pod, target.namespace, engine=CelEngine(), features=features, node=node
        )
    claims = target_claims(snapshot, target)
    placement = PodPlacement.from_pod(pod) if pod is not None else None
    return explain(
        snapshot, claims, engine=CelEngine(), features=features, node=node, placement=placement
    )


def _cmd_validate(args: argparse.Namespace) -> int:
    env = cel_environment(args.features, args.kube_version)
    # A broken file is a finding like any other: the other files are still judged.
    docs, broken = read_sources(files_of(args))
    result = validate_documents(
        docs, compile_check=lambda expr: check_selector(expr, env), broken=broken
    )
    if args.output == "wide":
        if result.findings:
            sys.stdout.write(findings_table(result.findings).render())
        sys.stdout.write(f"{result.summary(len(docs))}\n")
    elif args.output:
        sys.stdout.write(_dump(findings_report(result, len(docs)), args.output))
    else:
        for finding in result.findings:
            sys.stdout.write(f"{finding}\n")
        sys.stdout.write(f"{result.summary(len(docs))}\n")
    return EXIT_OK if result.ok else EXIT_FINDINGS


def _cmd_classes(args: argparse.Namespace) -> int:
    items = driver_device_classes()
    if args.output == "wide":
        sys.stdout.write(classes_table(items).render())
    elif args.output == "json":
        listing = {"apiVersion": "v1", "kind": "List", "items": items}
        sys.stdout.write(json.dumps(listing, indent=2) + "\n")
    else:
        sys.stdout.write(dump_all(items))
    return EXIT_OK


def _cmd_migrate(args: argparse.Namespace) -> int:
    result = migrate_documents(read_documents(files_of(args)), claims=args.to_claims)
    for where, error in result.errors:
        sys.stderr.write(f"error: {where}: {error}\n")
    if result.errors:
        sys.stderr.write(f"{len(result.errors)} object(s) cannot be migrated; nothing written\n")
        return EXIT_ERROR
    for note in result.notes:
        sys.stderr.write(f"note: {note}\n")
    if args.output == "wide":
        sys.stdout.write(objects_table(result.objects).render())
    elif args.output == "json":
        listing = {"apiVersion": "v1", "kind": "List", "items": result.objects}
        sys.stdout.write(json.dumps(listing, indent=2) + "\n")
    elif result.objects:
        sys.stdout.write(dump_all(result.objects))
    return EXIT_OK


COMMANDS = [
    Command(
        "allocate",
        "allocate claims offline, like the kube-scheduler",
        "  kubectl dra allocate -f cluster/ -f claims.yaml -o json\n"
        "  kubectl dra allocate -f cluster.yaml -f claims.yaml --claim team-a/h100 --node node-b\n"
        "  kubectl dra allocate -f cluster.yaml --claim h100 -n team-a --kube-version 1.36\n"
        "  kubectl dra allocate -f cluster/ -f claims.yaml -o wide       # node, device, product",
        _allocate_arguments,
        _cmd_allocate,
    ),
    Command(
        "explain",
        "why a pod's or claim's devices cannot be allocated (exit 1 when nothing fits)",
        "  kubectl dra explain pod/trainer -n team-a                 # live cluster\n"
        "  kubectl dra explain pod/trainer -n team-a --context prod --kubeconfig ~/.kube/prod\n"
        "  kubectl dra explain resourceclaim/h100 -n team-a -f cluster.yaml -f claims.yaml",
        _explain_arguments,
        _cmd_explain,
    ),
    Command(
        "validate",
        "check manifests as the API server would: schema, CEL, opaque configs",
        "  kubectl dra validate -f manifests/\n"
        "  kubectl dra validate -f claim.yaml -o json\n"
        "  kubectl dra validate -f manifests/ -o wide\n"
        "  kubectl get resourceclaims -A -o yaml | kubectl dra validate -f -",
        _validate_arguments,
        _cmd_validate,
    ),
    Command(
        "migrate",
        "classic DRA and device-plugin manifests to resource.k8s.io/v1 (notes on stderr)",
        "  kubectl dra migrate -f classic.yaml > migrated.yaml\n"
        "  kubectl dra migrate -f deployments/ --to-claims -o json\n"
        "  kubectl dra migrate -f classic.yaml -o wide                     # what it writes",
        _migrate_arguments,
        _cmd_migrate,
    ),
    Command(
        "classes",
        "the DeviceClasses this driver's chart installs (used offline when the input has "
        "none of that name)",
        "  kubectl dra classes\n  kubectl dra classes -o json\n  kubectl dra classes -o wide",
        _classes_arguments,
        _cmd_classes,
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
    handlers = {c.name: c.run for c in COMMANDS}
    try:
        with without_cycle_collection():
            return handlers[args.command](args)
    except (AllocationError, InputError, LiveClusterError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_ERROR


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
