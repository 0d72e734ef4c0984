"""`make lint` (scripts/module_size.py) keeps every module of the workspace (sources,
tests, benchmarks, tools) at or under 600 lines."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "module_size.py"

pytestmark = pytest.mark.skipif(not SCRIPT.is_file(), reason="not in the workspace checkout")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def _module(path: Path, lines: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"x{i} = {i}\n" for i in range(lines)))


def test_no_module_of_the_workspace_is_over_600_lines() -> None:
    result = _run()
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("0 over 600 lines")


def test_a_module_over_600_lines_is_listed_and_fails(tmp_path: Path) -> None:
    _module(tmp_path / "pkg" / "big.py", 601)
    _module(tmp_path / "pkg" / "sub" / "huge.py", 1200)
    _module(tmp_path / "pkg" / "limit.py", 600)
    result = _run(str(tmp_path))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert f"{tmp_path / 'pkg' / 'big.py'}: 601 lines (over 600)" in lines
    assert f"{tmp_path / 'pkg' / 'sub' / 'huge.py'}: 1200 lines (over 600)" in lines
    assert "limit.py" not in result.stdout
    assert lines[-1] == "3 modules, 2 over 600 lines"


def test_generated_code_is_not_counted(tmp_path: Path) -> None:
    _module(tmp_path / "pkg" / "_proto" / "service_pb2.py", 5000)
    _module(tmp_path / "pkg" / "small.py", 10)
    result = _run(str(tmp_path))
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines() == ["1 modules, 0 over 600 lines"]
