"""What each ``kubectl dra`` command does, once :mod:`kubectl_dra.cli` has parsed its
flags: the allocator, the models and the CEL compiler are imported here, not by the
command line, so a live explain's lists are on their way while they load."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
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
from dra_allocator.features import Features
from dra_allocator.inputs import InputError, read_documents, read_sources
from dra_allocator.pod_placement import PodPlacement
from dra_allocator.snapshot import Snapshot, add_driver_classes, build_snapshot
from dra_api_types.codec import dump_all
from dra_api_types.driver_classes import driver_device_classes

from .allocate_report import EXIT_ERROR, run_allocate
from .cluster_lists import ClusterLists, LiveClusterError, start_lists
from .findings import findings_report
from .gates import cel_environment, features_from_flags
from .live import cluster_documents
from .migrate import migrate_documents
from .parser import files_of, namespace_of, reclaim_positional
from .validation import check_selector, validate_documents
from .wide import allocate_table, classes_table, findings_table, objects_table

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FINDINGS = 1


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


def _cmd_explain(args: argparse.Namespace, lists: ClusterLists | None) -> int:
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
        if lists is None:  # the command line did not start them (``explain -f pod/x``)
            lists = start_lists(kubeconfig=args.kubeconfig, context=args.context)
        documents = cluster_documents(lists, namespace=target.namespace, pod=target.pod_name)
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


_OFFLINE: dict[str, Callable[[argparse.Namespace], int]] = {
    "allocate": _cmd_allocate,
    "validate": _cmd_validate,
    "migrate": _cmd_migrate,
    "classes": _cmd_classes,
}
#: Every command :func:`run_command` knows.
COMMAND_NAMES = frozenset({*_OFFLINE, "explain"})


def run_command(args: argparse.Namespace, lists: ClusterLists | None = None) -> int:
    """Run the parsed command ``args.command``; its exit code. ``lists``: the cluster's
    lists a live explain reads, if the command line started them already.

    An error of the input or the cluster is one line on stderr and :data:`EXIT_ERROR`.
    """
    try:
        if args.command == "explain":
            return _cmd_explain(args, lists)
        return _OFFLINE[args.command](args)
    except (AllocationError, InputError, LiveClusterError) as exc:
        sys.stderr.write(f"error: {exc}\n")
        return EXIT_ERROR
