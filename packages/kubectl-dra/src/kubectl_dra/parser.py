"""kubectl's conventions for every ``kubectl dra`` subcommand, in one place.

Each subcommand is a :class:`Command` (name, help, examples, its own arguments, its
handler); :func:`build_parser` gives every one the flags kubectl users expect:
``-f/--filename`` (repeatable; files, directories, ``-``), ``-n/--namespace``,
``--kubeconfig``, ``--context``, ``-v/--v`` (log verbosity), ``--version``, and the
examples in ``--help``. A new subcommand is one more :class:`Command`.

``-f a.yaml b.yaml`` (several files after one ``-f``) keeps working as before; a
positional that such a list swallowed (``explain -f a.yaml pod/x``) is given back to the
positional by :func:`reclaim_positional`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

DEFAULT_NAMESPACE = "default"
#: Flags that may come before or after the subcommand; absent unless given (see ``option``).
_GLOBAL_DEFAULTS: dict[str, object] = {
    "namespace": None,
    "kubeconfig": None,
    "context": None,
    "verbosity": 0,
}


@dataclass(frozen=True, slots=True)
class Command:
    """One subcommand: ``add_arguments`` adds its own flags, ``run`` handles it (exit code)."""

    name: str
    help: str
    examples: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    # Whether ``-f`` is required (explain reads the live cluster without it).
    files_required: bool = True


def package_version() -> str:
    """``kubectl-dra X.Y.Z`` as installed."""
    try:
        return f"kubectl-dra {version('kubectl-dra')}"
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "kubectl-dra (not installed)"


def _add_globals(parser: argparse.ArgumentParser) -> None:
    """Flags every subcommand takes, before or after its name (absent unless given)."""
    group = parser.add_argument_group("kubectl flags")
    group.add_argument(
        "-n",
        "--namespace",
        default=argparse.SUPPRESS,
        help=f"namespace of the names given (default: {DEFAULT_NAMESPACE})",
    )
    group.add_argument(
        "--kubeconfig",
        default=argparse.SUPPRESS,
        help="kubeconfig file for the live cluster (default: $KUBECONFIG, ~/.kube/config)",
    )
    group.add_argument(
        "--context", default=argparse.SUPPRESS, help="kubeconfig context for the live cluster"
    )
    group.add_argument(
        "-v",
        "--v",
        dest="verbosity",
        type=int,
        default=argparse.SUPPRESS,
        metavar="LEVEL",
        help="log verbosity: 0 errors only (default), 1-3 progress, 4+ debug "
        "(client retries included)",
    )
    group.add_argument("--version", action="version", version=package_version())


def add_files(parser: argparse.ArgumentParser, *, required: bool, help_text: str) -> None:
    """``-f/--filename``: repeatable; each takes one or more files, directories or ``-``."""
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        nargs="+",
        required=required,
        metavar="FILE_OR_DIR",
        help=f"{help_text}; repeatable; directories are read recursively "
        "(*.yaml, *.yml, *.json); - is stdin",
    )


def add_output(
    parser: argparse.ArgumentParser, choices: Sequence[str], default: str | None
) -> None:
    """``-o/--output`` where the output is data."""
    shown = f" (default: {default})" if default else ""
    parser.add_argument(
        "-o", "--output", choices=list(choices), default=default, help=f"output format{shown}"
    )


def build_parser(
    commands: Sequence[Command], *, description: str, epilog: str
) -> argparse.ArgumentParser:
    """The ``kubectl dra`` parser: the commands, each with the kubectl flags."""
    parser = argparse.ArgumentParser(
        prog="kubectl dra",
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_globals(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in commands:
        child = sub.add_parser(
            command.name,
            help=command.help,
            description=command.help,
            epilog=f"examples:\n{command.examples}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.add_arguments(child)
        _add_globals(child)
    return parser


def with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """The global flags not given set to their defaults (``namespace`` stays None if absent)."""
    for name, default in _GLOBAL_DEFAULTS.items():
        if not hasattr(args, name):
            setattr(args, name, default)
    return args


def namespace_of(args: argparse.Namespace) -> str:
    """``-n`` or ``default``."""
    return str(args.namespace) if args.namespace else DEFAULT_NAMESPACE


def files_of(args: argparse.Namespace) -> list[str]:
    """Every ``-f`` value, in order."""
    return [f for group in args.filename or [] for f in group]


def reclaim_positional(
    args: argparse.Namespace, dest: str, looks_like: Callable[[str], bool]
) -> None:
    """Give a positional swallowed by ``-f a b`` back: the last ``-f`` value that is no
    existing path and ``looks_like`` the positional, when the positional is missing."""
    if getattr(args, dest) is not None or not args.filename:
        return
    for group in reversed(args.filename):
        for value in reversed(group):
            if value != "-" and not os.path.exists(value) and looks_like(value):
                group.remove(value)
                setattr(args, dest, value)
                args.filename = [g for g in args.filename if g]
                return
