"""The host preflight: one list of tools and packages, one line with the fix, in seconds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dra_e2e import preflight
from dra_e2e.errors import PrerequisiteError
from dra_e2e.prerequisites import PREREQUISITES, Purpose, Tool, missing, missing_message, needed

RUNC_LINE = "required tool 'runc' not found: apt-get install runc"


def _path_without(tmp_path: Path, hidden: str, purpose: Purpose) -> str:
    """A PATH directory with a link to every command ``purpose`` needs except ``hidden``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for prerequisite in needed(purpose):
        tool = prerequisite.tool
        if tool.paths or tool.name == hidden:
            continue
        found = shutil.which(tool.name)
        assert found is not None, f"{tool.name} is missing here: run `make prepare` first"
        (bin_dir / tool.name).symlink_to(found)
    return str(bin_dir)


def test_each_purpose_needs_what_the_lower_ones_need() -> None:
    cluster, e2e, test = (set(needed(p)) for p in (Purpose.CLUSTER, Purpose.E2E, Purpose.TEST))
    assert cluster < e2e < test
    assert set(PREREQUISITES) == test
    assert {p.tool.name for p in cluster} >= {"runc", "iptables", "ip", "busybox"}


def test_one_line_names_the_tool_and_the_package() -> None:
    (runc,) = (p for p in PREREQUISITES if p.tool.name == "runc")
    problem, fix = missing_message([runc])
    assert f"{problem}: {fix}" == RUNC_LINE


def test_tools_of_one_package_install_it_once() -> None:
    absent = missing(Purpose.CLUSTER, lambda tool: not tool.name.startswith("CNI plugin"))
    problem, fix = missing_message(absent)
    assert problem == (
        "required tools 'CNI plugin bridge', 'CNI plugin host-local', 'CNI plugin portmap' "
        "not found"
    )
    assert fix == "apt-get install containernetworking-plugins"


def test_without_apt_the_fix_names_the_debian_packages() -> None:
    absent = missing(Purpose.CLUSTER, lambda tool: tool.name not in ("runc", "ip"))
    problem, fix = missing_message(absent, apt=False)
    assert problem == "required tools 'runc', 'ip' not found"
    assert "runc iproute2" in fix
    assert "apt-get" not in fix


def test_missing_message_needs_something_missing() -> None:
    with pytest.raises(ValueError, match="at least one"):
        missing_message([])


@pytest.mark.parametrize(
    ("text", "version"),
    [("go1.26.8", (1, 26, 8)), ("go1.21", (1, 21, 0)), ("go version go1.19.2 linux", (1, 19, 2))],
)
def test_go_versions_parse(text: str, version: tuple[int, int, int]) -> None:
    assert preflight.parse_go_version(text) == version


def test_no_go_version_in_garbage() -> None:
    assert preflight.parse_go_version("command not found") is None


def test_the_wanted_go_is_the_newest_module_directive() -> None:
    version = preflight.parse_go_version("go" + preflight.wanted_go())
    assert version is not None
    assert version[:2] >= preflight.MIN_GO


def test_a_file_tool_is_found_at_any_of_its_paths(tmp_path: Path) -> None:
    there = tmp_path / "bridge"
    there.write_text("")
    assert preflight.tool_path(Tool("bridge", (str(tmp_path / "nope"), str(there)))) == str(there)
    assert preflight.tool_path(Tool("bridge", (str(tmp_path / "nope"),))) is None


def test_check_tools_raises_one_line_for_a_tool_hidden_from_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", _path_without(tmp_path, "runc", Purpose.E2E))
    with pytest.raises(PrerequisiteError) as info:
        preflight.check_tools(Purpose.E2E)
    assert str(info.value) == RUNC_LINE
    assert info.value.fix == "apt-get install runc"


def test_cli_preflight_fails_fast_with_one_line_without_runc(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the tools are checked after root; the line for a non-root user differs")
    env = {**os.environ, "PATH": _path_without(tmp_path, "runc", Purpose.E2E)}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "dra_e2e", "preflight", "--for", "e2e"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert result.stderr == f"e2e-cluster: {RUNC_LINE}\n"
    assert result.stdout == ""
    assert elapsed < 15, f"the preflight took {elapsed:.1f}s"


def test_cli_preflight_passes_on_a_prepared_host() -> None:
    if os.geteuid() != 0:
        pytest.skip("the preflight needs root")
    result = subprocess.run(
        [sys.executable, "-m", "dra_e2e", "preflight", "--for", "e2e"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
