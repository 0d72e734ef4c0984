"""Where a host's CPU went over a span: each cluster process, our pods, the benchmark, the
rest, idle and steal.

The scale benchmark runs the whole cluster on one VM, so whether the scheduler keeps up
depends on what else took the CPU while it ran. Two readings of the same counters, one at
each end of a span, say it: each named process's ``utime + stime`` (``/proc/<pid>/stat``)
and the host's totals (the ``cpu`` line of ``/proc/stat``: busy, idle, and steal, the time
the hypervisor gave this VM's vCPUs to someone else).

Pure: the texts in, the split and its report lines out; ``e2e/bench/bench_scale.py`` reads
the files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: The rest of the host's busy time, after the named processes.
OTHER = "other"
IDLE = "idle"
STEAL = "steal"


class ProcStatTotalsError(ValueError):
    """A ``/proc/stat`` text without the ``cpu`` line the split reads."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"/proc/stat cpu line: {detail}")


@dataclass(frozen=True)
class HostTotals:
    """The host's CPU seconds so far, all vCPUs together."""

    busy_s: float
    idle_s: float
    steal_s: float


def parse_host_totals(text: str, *, ticks: int = _CLOCK_TICKS) -> HostTotals:
    """The ``cpu`` line of a ``/proc/stat`` text as seconds.

    Busy is user, nice, system, irq and softirq (guest time is already inside user); idle
    is idle and iowait; steal is on its own.

    Raises:
        ProcStatTotalsError: no ``cpu`` line, or fewer than the eight fields up to steal.
    """
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] != "cpu":
            continue
        if len(fields) < 9:
            raise ProcStatTotalsError(f"only {len(fields) - 1} fields, steal is the 8th")
        try:
            user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
        except ValueError as exc:
            raise ProcStatTotalsError(str(exc)) from exc
        return HostTotals(
            busy_s=(user + nice + system + irq + softirq) / ticks,
            idle_s=(idle + iowait) / ticks,
            steal_s=steal / ticks,
        )
    raise ProcStatTotalsError("missing")


@dataclass(frozen=True)
class CpuReading:
    """The counters at one moment: named processes' CPU seconds and the host's totals."""

    processes: Mapping[str, float]
    host: HostTotals


@dataclass(frozen=True)
class CpuSplit:
    """CPU seconds over a span: each name read at both ends, then other, idle and steal."""

    seconds: float
    parts: Mapping[str, float]

    def cores(self, name: str) -> float | None:
        """``name``'s share as cores (CPU seconds per second of the span)."""
        value = self.parts.get(name)
        return None if value is None or self.seconds <= 0 else value / self.seconds


def split(start: CpuReading, end: CpuReading, seconds: float) -> CpuSplit:
    """Where the CPU went between two readings ``seconds`` apart.

    A process read at only one end (started or ended inside the span) is left out, its
    time counted in ``other``; so is time of processes never named.
    """
    parts = {
        name: max(0.0, end.processes[name] - value)
        for name, value in start.processes.items()
        if name in end.processes
    }
    busy = end.host.busy_s - start.host.busy_s
    parts[OTHER] = max(0.0, busy - sum(parts.values()))
    parts[IDLE] = max(0.0, end.host.idle_s - start.host.idle_s)
    parts[STEAL] = max(0.0, end.host.steal_s - start.host.steal_s)
    return CpuSplit(seconds=seconds, parts=parts)


def _cell(split_: CpuSplit | None, name: str) -> str:
    if split_ is None:
        return "-"
    cores = split_.cores(name)
    return "n/a" if cores is None else f"{cores:.2f} core"


def cpu_lines(title: str, without: CpuSplit | None, with_: CpuSplit | None) -> list[str]:
    """A small table: each part's cores in the two phases, largest first, then other, idle
    and steal (``-``: that phase did not run)."""
    splits = [s for s in (without, with_) if s is not None]
    if not splits:
        return []
    tail = (OTHER, IDLE, STEAL)
    named = sorted(
        {n for s in splits for n in s.parts if n not in tail},
        key=lambda n: -max(s.parts.get(n, 0.0) for s in splits),
    )
    names: Sequence[str] = [*named, *tail]
    seconds = " / ".join("-" if s is None else f"{s.seconds:.0f} s" for s in (without, with_))
    width = max(len(n) for n in names)
    lines = [f"{title} ({seconds}):", f"  {'':{width}} {'without':>12} {'with':>12}"]
    lines += [f"  {n:{width}} {_cell(without, n):>12} {_cell(with_, n):>12}" for n in names]
    return lines
