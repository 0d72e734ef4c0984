"""Daemon records: a process is found again by pid *and* start time, never by name."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest
from dra_e2e.process import (
    ProcessRecord,
    is_running,
    kill_pids,
    pids_referencing,
    spawn,
    stop,
    tail,
    write_bytecode,
)


def test_spawn_logs_and_stop(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "sleeper.log"
    record = spawn("sleeper", ["/bin/sh", "-c", "echo started; exec sleep 60"], log=log)
    try:
        assert is_running(record)
        assert ProcessRecord.from_json(record.to_json()) == record
    finally:
        assert stop(record, timeout=5) is True
    assert not is_running(record)
    assert "starting: /bin/sh" in tail(log)
    assert stop(record) is False


def test_a_recycled_pid_is_not_the_recorded_process(tmp_path: Path) -> None:
    record = spawn("sleeper", ["sleep", "60"], log=tmp_path / "s.log")
    try:
        impostor = dataclasses.replace(record, start_time=record.start_time - 1)
        assert not is_running(impostor)
        assert stop(impostor) is False
        assert is_running(record)
    finally:
        stop(record, timeout=5)


def test_sweep_matches_only_our_executables_naming_the_state_dir(tmp_path: Path) -> None:
    ours = tmp_path / "bin"
    ours.mkdir()
    shell = shutil.which("sh")
    assert shell is not None
    shutil.copy(shell, ours / "sh")
    needle = str(tmp_path / "state")
    loop = "while :; do sleep 1; done"

    def start(name: str, binary: str, arg: str) -> ProcessRecord:
        return spawn(name, [binary, "-c", loop, arg], log=tmp_path / f"{name}.log")

    # Ours: our binary, an argument inside the state directory.
    mine = start("mine", str(ours / "sh"), f"--address={needle}/sock")
    # Not ours: a system binary naming the same directory (a user's `tail -f`, say).
    foreign = start("foreign", shell, needle)
    # Not ours: our binary naming a directory that merely shares the prefix.
    sibling = start("sibling", str(ours / "sh"), needle + "2")
    try:
        found = pids_referencing(needle, executables_under=[ours])
        assert found == [mine.pid]
        assert kill_pids(found, timeout=5) == [mine.pid]
        assert not is_running(mine)
        assert is_running(foreign)
        assert is_running(sibling)
    finally:
        for record in (mine, foreign, sibling):
            stop(record, timeout=5)


def test_write_bytecode_writes_it_even_where_the_shell_says_not_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "benchpkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import part\n")
    (package / "part.py").write_text("VALUE = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    write_bytecode("benchpkg")
    written = sorted(p.name.split(".")[0] for p in (package / "__pycache__").iterdir())
    assert written == ["__init__", "part"]  # what the module imports, too
    with pytest.raises(subprocess.CalledProcessError):
        write_bytecode("benchpkg.missing")
