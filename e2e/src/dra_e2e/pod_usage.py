"""CPU seconds and peak resident memory of a pod's processes, read from ``/proc``.

The harness's nodes run their containers on this host, so a pod's processes are in this
host's ``/proc``: those whose cgroup path names the pod (``pod<uid>`` with the cgroupfs
driver the harness's kubelets use, ``pod<uid_with_underscores>`` with systemd's). Of each
(the sandbox's ``pause`` left out): CPU seconds (``utime + stime`` of ``/proc/<pid>/stat``)
and the kernel's high-water mark of its resident memory (``VmHWM``), which is exact: no
sampler can miss a peak the kernel records itself.

The parsers are pure; :func:`pod_usage` reads the files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dra_e2e.footprint import parse_proc_status

#: The sandbox process every pod has; not the component's.
PAUSE = "pause"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class ProcStatError(ValueError):
    """A ``/proc/<pid>/stat`` text that does not have the fields the benchmark reads."""

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"/proc stat field {field}: {detail}")
        self.field = field


@dataclass(frozen=True)
class ProcessUsage:
    """One process: its name, CPU seconds so far, resident memory now and at its peak."""

    pid: int
    comm: str
    cpu_s: float
    rss: int
    peak_rss: int


@dataclass(frozen=True)
class PodUsage:
    """A pod's processes (``pause`` left out) at one moment."""

    processes: tuple[ProcessUsage, ...]

    @property
    def cpu_s(self) -> float:
        """CPU seconds of all its processes so far."""
        return sum(p.cpu_s for p in self.processes)

    @property
    def peak_rss(self) -> int:
        """The largest peak resident memory of one of its processes, bytes (a component is
        one process; summing would count the shared pages twice)."""
        return max((p.peak_rss for p in self.processes), default=0)


def parse_stat(text: str, *, ticks: int = _CLOCK_TICKS) -> tuple[str, float]:
    """``(comm, utime + stime in seconds)`` of a ``/proc/<pid>/stat`` text.

    The name is in parentheses and may hold spaces and parentheses itself: the fields are
    counted from its last ``)``.

    Raises:
        ProcStatError: no ``(comm)``, or too few fields, or a time that is not a number.
    """
    head, sep, tail = text.rpartition(")")
    _, open_, comm = head.partition("(")
    if not sep or not open_:
        raise ProcStatError("comm", f"no '(name)' in {text[:60]!r}")
    fields = tail.split()
    # After comm: state(0) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
    # cmajflt utime(11) stime(12).
    if len(fields) < 13:
        raise ProcStatError("utime", f"only {len(fields)} fields after the name")
    try:
        return comm, (int(fields[11]) + int(fields[12])) / ticks
    except ValueError as exc:
        raise ProcStatError("utime", str(exc)) from exc


def in_pod(cgroup_text: str, pod_uid: str) -> bool:
    """Whether a ``/proc/<pid>/cgroup`` text places the process in pod ``pod_uid``."""
    cgroupfs = f"pod{pod_uid}"
    systemd = f"pod{pod_uid.replace('-', '_')}.slice"  # kubepods-burstable-pod<uid>.slice
    return any(
        part == cgroupfs or part.endswith(systemd)
        for line in cgroup_text.splitlines()
        for part in line.split(":", 2)[-1].split("/")
    )


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:  # the process ended between the listing and the read
        return None


def pod_pids(pod_uid: str, *, proc: Path = Path("/proc")) -> list[int]:
    """The processes of pod ``pod_uid`` on this host, in pid order."""
    pids = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            text = _read(entry / "cgroup")
            if text is not None and in_pod(text, pod_uid):
                pids.append(int(entry.name))
    return sorted(pids)


def process_usage(pid: int, *, proc: Path = Path("/proc")) -> ProcessUsage | None:
    """One process's usage; ``None`` if it is gone."""
    stat = _read(proc / str(pid) / "stat")
    status = _read(proc / str(pid) / "status")
    if stat is None or status is None:
        return None
    comm, cpu_s = parse_stat(stat)
    memory = parse_proc_status(status)
    return ProcessUsage(pid, comm, cpu_s, memory.rss, memory.peak_rss)


def pod_usage(pod_uid: str, *, proc: Path = Path("/proc")) -> PodUsage:
    """The usage of pod ``pod_uid``'s processes but ``pause`` (none found: empty)."""
    found = (process_usage(pid, proc=proc) for pid in pod_pids(pod_uid, proc=proc))
    return PodUsage(tuple(u for u in found if u is not None and u.comm != PAUSE))
