"""The per-node footprint benchmark's arithmetic: memory figures read from ``/proc/<pid>/status``
and the report rows that put each figure next to its target and to the floor process.

Pure: the benchmark (``e2e/bench/bench_footprint.py``) reads the files and runs the processes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FootprintRow", "MemoryFigures", "format_row", "parse_proc_status", "ratio"]

_KIB = 1024
_MB = 1_000_000


class ProcStatusError(ValueError):
    """A ``/proc/<pid>/status`` text lacks a field the benchmark reads, or holds a bad one."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"/proc status field {field}: {detail}")
        self.field = field


@dataclass(frozen=True)
class MemoryFigures:
    """A process's resident memory now and at its peak (the kernel's high-water mark), bytes."""

    rss: int
    peak_rss: int


def _kib_field(text: str, field: str) -> int:
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name != field:
            continue
        parts = value.split()
        if len(parts) != 2 or parts[1] != "kB" or not parts[0].isdigit():
            raise ProcStatusError(field, f"{value.strip()!r} is not '<n> kB'")
        return int(parts[0]) * _KIB
    raise ProcStatusError(field, "missing")


def parse_proc_status(text: str) -> MemoryFigures:
    """``VmRSS`` and ``VmHWM`` of a ``/proc/<pid>/status`` text (the kernel writes kB, meaning
    KiB).

    Raises:
        ProcStatusError: either field is missing or not ``<n> kB``.
    """
    return MemoryFigures(rss=_kib_field(text, "VmRSS"), peak_rss=_kib_field(text, "VmHWM"))


def ratio(value: float | None, floor: float | None) -> str:
    """``value / floor`` as ``2.3x`` (``n/a`` when either is missing or the floor is zero)."""
    if value is None or floor is None or floor == 0:
        return "n/a"
    return f"{value / floor:.1f}x"


@dataclass(frozen=True)
class FootprintRow:
    """One figure of the report: a component's value, its target (None: none set) and the same
    figure of the floor process. Memory is in bytes, times in seconds."""

    component: str
    figure: str
    value: float | None
    target: float | None
    floor: float | None
    unit: str  # "MB" or "s"


def _show(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value / _MB:.1f} MB" if unit == "MB" else f"{value:.2f} s"


def format_row(row: FootprintRow) -> str:
    """The report line: value, ``<= target`` with ``ok``/``MISSED``, and the ratio to the
    floor."""
    if row.target is None:
        against = "(no target)"
    elif row.value is None:
        against = f"<= {_show(row.target, row.unit)} n/a"
    else:
        verdict = "ok" if row.value <= row.target else "MISSED"
        against = f"<= {_show(row.target, row.unit)} {verdict}"
    return (
        f"{row.component:<12}{row.figure:<26}{_show(row.value, row.unit):>10}  "
        f"{against:<20}{ratio(row.value, row.floor):>8} of floor"
    )
