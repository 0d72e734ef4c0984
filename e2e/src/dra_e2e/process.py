"""Start daemons detached from the caller and stop exactly those processes later.

A daemon outlives the ``e2e-cluster up`` process that started it, so it is
identified later by (pid, start time) read from /proc: a recycled pid never
matches, and nothing is ever stopped by name.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ProcessRecord:
    """A started daemon: enough to find it again and to show its log."""

    name: str
    pid: int
    start_time: int
    argv: tuple[str, ...]
    log: str

    def to_json(self) -> dict[str, Any]:
        """Plain data for the cluster state file."""
        data = asdict(self)
        data["argv"] = list(self.argv)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessRecord:
        """Inverse of ``to_json``."""
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_time=int(data["start_time"]),
            argv=tuple(str(a) for a in data["argv"]),
            log=str(data["log"]),
        )


def proc_start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot, or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may contain spaces; fields after it are fixed.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def is_running(record: ProcessRecord) -> bool:
    """Whether the recorded process (same pid and start time) is still alive."""
    return proc_start_time(record.pid) == record.start_time


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProcessRecord:
    """Start ``argv`` in its own session with stdout/stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        out.write(f"=== {time.strftime('%H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
        )
    start = proc_start_time(proc.pid)
    # Popen keeps a handle only to reap the child if it dies while we still run.
    _children.append(proc)
    return ProcessRecord(
        name=name,
        pid=proc.pid,
        start_time=start if start is not None else -1,
        argv=tuple(argv),
        log=str(log),
    )


_children: list[subprocess.Popen[bytes]] = []


def reap_children() -> None:
    """Collect exit statuses of exited children so they do not linger as zombies."""
    for proc in list(_children):
        if proc.poll() is not None:
            _children.remove(proc)


def stop(record: ProcessRecord, *, timeout: float = 15.0) -> bool:
    """SIGTERM the recorded process, SIGKILL it after ``timeout``; True if it was running."""
    if not is_running(record):
        reap_children()
        return False
    _signal(record.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap_children()
        if not is_running(record):
            return True
        time.sleep(0.1)
    _signal(record.pid, signal.SIGKILL)
    for _ in range(100):
        reap_children()
        if not is_running(record):
            break
        time.sleep(0.05)
    return True


def signal_and_wait(record: ProcessRecord, sig: signal.Signals, *, timeout: float = 15.0) -> bool:
    """Send ``sig`` to the recorded process and wait until it is gone; True if it was running.

    For crash tests (SIGKILL: no cleanup at all). A process still alive after ``timeout`` is
    SIGKILLed, so the caller can always start a replacement.
    """
    if not is_running(record):
        reap_children()
        return False
    _signal(record.pid, sig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap_children()
        if not is_running(record):
            return True
        time.sleep(0.05)
    return stop(record, timeout=0)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def pids_referencing(needle: str, *, executables_under: Sequence[Path]) -> list[int]:
    """Pids of our own executables whose command line names ``needle``.

    containerd's shims daemonize away from containerd, so after containerd stops
    they are found by the socket path in their arguments, which lies inside this
    cluster's state directory. Only processes running a binary from
    ``executables_under`` (the harness's build cache) qualify, so a user's
    ``tail -f`` of a log in the state directory is never touched.
    """
    pattern = re.compile(re.escape(needle) + r"(?=[/\s=:]|$)")
    roots = [str(Path(p).resolve()) + "/" for p in executables_under]
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            exe = os.readlink(entry / "exe")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if any(exe.startswith(root) for root in roots) and pattern.search(cmdline):
            found.append(int(entry.name))
    return found


def kill_pids(pids: Iterable[int], *, timeout: float = 5.0) -> list[int]:
    """SIGTERM then SIGKILL the given pids; return those that were signalled."""
    targets = {pid: proc_start_time(pid) for pid in pids}
    targets = {pid: st for pid, st in targets.items() if st is not None}
    for pid in targets:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(proc_start_time(pid) != st for pid, st in targets.items()):
            return list(targets)
        time.sleep(0.1)
    for pid, st in targets.items():
        if proc_start_time(pid) == st:
            _signal(pid, signal.SIGKILL)
    return list(targets)


def tail(path: Path | str, *, lines: int = 40) -> str:
    """Last ``lines`` lines of a log file ('' if it does not exist)."""
    try:
        data = Path(path).read_text(errors="replace")
    except FileNotFoundError:
        return ""
    return "".join(data.splitlines(keepends=True)[-lines:])


def write_bytecode(*modules: str) -> None:
    """Import ``modules`` (and all they import) in a fresh interpreter that writes their
    bytecode, as an installed package or the image has it.

    A benchmark times our processes as users run them: without this, each timed process
    would compile every module of the workspace at start (a fresh checkout has no
    bytecode, and ``PYTHONDONTWRITEBYTECODE``, set in many development shells, keeps it so),
    and be measured with the compiler's time and memory.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = "import " + ", ".join(modules)
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
