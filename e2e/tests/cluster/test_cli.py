"""``e2e-cluster`` without a cluster: clear errors, no tracebacks, non-zero exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dra_e2e", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("command", ["down", "status", "kubeconfig", "logs", "add-node"])
def test_commands_on_a_missing_cluster_fail_cleanly(tmp_path: Path, command: str) -> None:
    result = _cli("--state-dir", str(tmp_path / "none"), command)
    assert result.returncode == 1
    assert result.stderr.startswith("e2e-cluster: ")
    assert str(tmp_path / "none") in result.stderr
    assert "Traceback" not in result.stderr


def test_help_lists_every_command() -> None:
    result = _cli("--help")
    assert result.returncode == 0
    commands = (
        "up",
        "down",
        "status",
        "kubeconfig",
        "logs",
        "add-node",
        "restart-kubelet",
        "import-image",
        "list",
    )
    for command in commands:
        assert command in result.stdout
