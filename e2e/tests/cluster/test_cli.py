"""``e2e-cluster`` without a cluster: clear errors, no tracebacks, non-zero exits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from dra_e2e import cli


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dra_e2e", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "command", ["down", "status", "kubeconfig", "logs", "add-node", "install-driver"]
)
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
        "install-driver",
        "list",
    )
    for command in commands:
        assert command in result.stdout


def test_up_takes_a_node_count() -> None:
    assert cli._parser().parse_args(["up"]).nodes == 1
    assert cli._parser().parse_args(["up", "--nodes", "3"]).nodes == 3


@pytest.mark.parametrize("value", ["0", "9", "two"])
def test_up_refuses_a_node_count_out_of_range(tmp_path: Path, value: str) -> None:
    result = _cli("--state-dir", str(tmp_path / "none"), "up", "--nodes", value)
    assert result.returncode == 2
    assert "--nodes" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "none").exists()


def test_install_driver_takes_sets_and_values_files_in_order() -> None:
    args = cli._parser().parse_args(
        [
            "install-driver",
            "--set",
            "devices.fakeGpus={2xA100-40GB,2xL4}",
            "--values",
            "a.yaml",
            "--set",
            "logVerbosity=6",
            "--values",
            "b.yaml",
        ]
    )
    assert args.sets == ["devices.fakeGpus={2xA100-40GB,2xL4}", "logVerbosity=6"]
    assert args.values_files == [Path("a.yaml"), Path("b.yaml")]
    bare = cli._parser().parse_args(["install-driver"])
    assert (bare.sets, bare.values_files) == ([], [])


def test_install_driver_names_a_set_without_a_value(tmp_path: Path) -> None:
    result = _cli("--state-dir", str(tmp_path), "install-driver", "--set", "logVerbosity")
    assert result.returncode == 1
    assert result.stderr.startswith("e2e-cluster: ")
    assert "--set 'logVerbosity' is not KEY=VALUE" in result.stderr
    assert "Traceback" not in result.stderr
