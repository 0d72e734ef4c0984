"""``kubectl dra``: the kubectl plugin (console script ``kubectl-dra``). Only wiring here."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import yaml
from dra_allocator.cel_engine import CelEngine
from dra_allocator.errors import AllocationError
from dra_allocator.explain_report import (
    explain,
    explain_pod,
    needs_pod_explain,
    parse_target,
    target_claims,
    target_pod,
)
from dra_allocator.features import KUBE_MINORS
from dra_allocator.inputs import InputError, read_documents, read_sources
from dra_allocator.pod_placement import PodPlacement
from dra_allocator.snapshot import Snapshot, add_driver_classes, build_snapshot
from dra_api_types.codec import dump_all
from dra_api_types.driver_classes import driver_device_classes

from .allocate_report import EXIT_ERROR, run_allocate
from .gates import cel_environment, features_from_flags
from .live import LiveClusterError, fetch_documents
from .migrate import migrate_documents
from .validation import check_selector, validate_documents

EXIT_OK = 0
EXIT_FINDINGS = 1


def _files(groups: Sequence[Sequence[str]] | None) -> list[str]:
    return [f for group in groups or [] for f in group]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl dra",
        description="Dynamic Resource Allocation tools: allocate offline, explain pending "
        "claims, validate and migrate manifests.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    alloc = sub.add_parser("allocate", help="allocate claims offline, like the kube-scheduler")
    alloc.add_argument(
        "-f",
        "--filename",
        action="append",
        nargs="+",
        required=True,
        metavar="FILE_OR_DIR",
        help="manifests (DeviceClasses, ResourceSlices, "
        "ResourceClaims, Nodes); directories are read recursively; - is stdin",
    )
    alloc.add_argument(
        "--node", help="allocate on this node (default: first that fits, nodes in name order)"
    )
    alloc.add_argument(
        "--claim",
        action="append",
        nargs="+",
        metavar="NS/NAME",
        help="claims to allocate together (default: every unallocated claim)",
    )
    alloc.add_argument(
        "--features",
        default=None,
        metavar="GATE[,GATE=false...]",
        help="feature gates that are on (default: all DRA features)",
    )
    alloc.add_argument(
        "--kube-version",
        default=None,
        metavar="1.MINOR",
        help="reproduce the kube-scheduler of this release where releases differ "
        f"(known: {', '.join(f'1.{m}' for m in KUBE_MINORS)}; default: the newest)",
    )
    alloc.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")

    expl = sub.add_parser("explain", help="why a pod's or claim's devices cannot be allocated")
    expl.add_argument("target", metavar="pod/NAME|resourceclaim/NAME")
    expl.add_argument("-n", "--namespace", default="default")
    expl.add_argument(
        "-f",
        "--filename",
        action="append",
        nargs="+",
        metavar="FILE_OR_DIR",
        help="explain offline from manifests instead of the live cluster",
    )
    expl.add_argument("--node", help="only this node")
    expl.add_argument("--features", default=None, metavar="GATE[,GATE=false...]")
    expl.add_argument("--kube-version", default=None, metavar="1.MINOR")
    expl.add_argument("--context", help="kubeconfig context (live mode)")

    val = sub.add_parser("validate", help="check manifests: schema, CEL, opaque configs")
    val.add_argument(
        "-f", "--filename", action="append", nargs="+", required=True, metavar="FILE_OR_DIR"
    )
    val.add_argument(
        "--features",
        default=None,
        metavar="GATE[,GATE=false...]",
        help="the API server's DRA gates (listed on, others off; default: the release's): "
        "DRAConsumableCapacity and DRAListTypeAttributes shape its CEL environment",
    )
    val.add_argument("--kube-version", default=None, metavar="1.MINOR")

    mig = sub.add_parser(
        "migrate",
        help="classic DRA and device-plugin manifests to resource.k8s.io/v1 (notes on stderr)",
    )
    mig.add_argument(
        "-f", "--filename", action="append", nargs="+", required=True, metavar="FILE_OR_DIR"
    )
    mig.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    mig.add_argument(
        "--to-claims",
        action="store_true",
        help="rewrite device-plugin requests (nvidia.com/gpu: N) to ResourceClaimTemplates "
        "instead of leaving them to the scheduler's extended-resource mapping",
    )
    classes = sub.add_parser(
        "classes",
        help="the DeviceClasses this driver's chart installs (used offline when the input "
        "has none of that name)",
    )
    classes.add_argument("-o", "--output", choices=["yaml", "json"], default="yaml")
    return parser


def _dump(report: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(report, indent=2) + "\n"
    return yaml.safe_dump(report, sort_keys=False, default_flow_style=False)


def _offline_snapshot(files: Sequence[Sequence[str]]) -> Snapshot:
    """The snapshot of the files, with the chart's DeviceClasses the input lacks."""
    snapshot = build_snapshot(read_documents(_files(files)))
    add_driver_classes(snapshot)
    return snapshot


def _write_notes(snapshot: Snapshot) -> None:
    # What the input did not say (made-up names, chart classes): stdout stays the report.
    for note in snapshot.notes:
        sys.stderr.write(f"note: {note}\n")


def _cmd_allocate(args: argparse.Namespace) -> int:
    snapshot = _offline_snapshot(args.filename)
    _write_notes(snapshot)
    result = run_allocate(
        snapshot,
        engine=CelEngine(),
        features=features_from_flags(args.features, args.kube_version),
        node=args.node,
        claim_keys=_files(args.claim),
    )
    sys.stdout.write(_dump(result.report, args.output))
    return result.exit_code


def _cmd_explain(args: argparse.Namespace) -> int:
    target = parse_target(args.target, args.namespace)
    if args.filename:
        snapshot = _offline_snapshot(args.filename)
    else:
        snapshot = build_snapshot(
            fetch_documents(namespace=target.namespace, context=args.context, pod=target.pod_name)
        )
    _write_notes(snapshot)
    pod = target_pod(snapshot, target)
    if pod is not None and needs_pod_explain(snapshot, pod):
        sys.stdout.write(
            explain_pod(
                snapshot,
                pod,
                target.namespace,
                engine=CelEngine(),
                features=features_from_flags(args.features),
                node=args.node,
            )
        )
        return EXIT_OK
    claims = target_claims(snapshot, target)
    placement = PodPlacement.from_pod(pod) if pod is not None else None
    sys.stdout.write(
        explain(
            snapshot,
            claims,
            engine=CelEngine(),
            features=features_from_flags(args.features, args.kube_version),
            node=args.node,
            placement=placement,
        )
    )
    return EXIT_OK


def _cmd_validate(args: argparse.Namespace) -> int:
    env = cel_environment(args.features, args.kube_version)
    # A broken file is a finding like any other: the other files are still judged.
    docs, broken = read_sources(_files(args.filename))
    result = validate_documents(
        docs, compile_check=lambda expr: check_selector(expr, env), broken=broken
    )
    for finding in result.findings:
        sys.stdout.write(f"{finding}\n")
    sys.stdout.write(f"{result.summary(len(docs))}\n")
    return EXIT_OK if result.ok else EXIT_FINDINGS


def _cmd_classes(args: argparse.Namespace) -> int:
    items = driver_device_classes()
    if args.output == "json":
        listing = {"apiVersion": "v1", "kind": "List", "items": items}
        sys.stdout.write(json.dumps(listing, indent=2) + "\n")
    else:
        sys.stdout.write(dump_all(items))
    return EXIT_OK


def _cmd_migrate(args: argparse.Namespace) -> int:
    result = migrate_documents(read_documents(_files(args.filename)), claims=args.to_claims)
    for where, error in result.errors:
        sys.stderr.write(f"error: {where}: {error}\n")
    if result.errors:
        sys.stderr.write(f"{len(result.errors)} object(s) cannot be migrated; nothing written\n")
        return EXIT_ERROR
    for note in result.notes:
        sys.stderr.write(f"note: {note}\n")
    if args.output == "json":
        listing = {"apiVersion": "v1", "kind": "List", "items": result.objects}
        sys.stdout.write(json.dumps(listing, indent=2) + "\n")
    elif result.objects:
        sys.stdout.write(dump_all(result.objects))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``kubectl-dra``; returns the exit code."""
    args = _parser().parse_args(argv)
    handlers = {
        "allocate": _cmd_allocate,
        "classes": _cmd_classes,
        "explain": _cmd_explain,
        "migrate": _cmd_migrate,
        "validate": _cmd_validate,
    }
    try:
        return handlers[args.command](args)
    except (AllocationError, InputError, LiveClusterError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
