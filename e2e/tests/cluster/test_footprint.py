"""The footprint benchmark's arithmetic (/proc status parsing, the report rows), and what the
two plugins load at start."""

from __future__ import annotations

import subprocess
import sys

import pytest
from dra_e2e.footprint import (
    FootprintRow,
    MemoryFigures,
    ProcStatusError,
    format_row,
    parse_proc_status,
    ratio,
)

STATUS = """Name:\tpython
Umask:\t0022
State:\tS (sleeping)
VmPeak:\t  400000 kB
VmHWM:\t   73400 kB
VmRSS:\t   70000 kB
Threads:\t12
"""


def test_rss_and_peak_are_read_in_bytes_from_kib() -> None:
    assert parse_proc_status(STATUS) == MemoryFigures(rss=70000 * 1024, peak_rss=73400 * 1024)


def test_missing_field_is_named() -> None:
    with pytest.raises(ProcStatusError) as err:
        parse_proc_status("Name:\tpython\nVmRSS:\t 10 kB\n")
    assert err.value.field == "VmHWM"


def test_field_without_unit_is_named() -> None:
    with pytest.raises(ProcStatusError, match="VmRSS") as err:
        parse_proc_status("VmRSS:\t10\nVmHWM:\t 10 kB\n")
    assert err.value.field == "VmRSS"


def test_field_name_must_match_exactly() -> None:
    # VmRSSx is not VmRSS: the parser looks for the name before the colon, not a prefix.
    with pytest.raises(ProcStatusError):
        parse_proc_status("VmRSSx:\t10 kB\nVmHWM:\t10 kB\n")


@pytest.mark.parametrize(
    ("value", "floor", "shown"),
    [
        (80.0, 40.0, "2.0x"),
        (45.0, 40.0, "1.1x"),
        (None, 40.0, "n/a"),
        (1.0, None, "n/a"),
        (1.0, 0.0, "n/a"),
    ],
)
def test_ratio_to_floor(value: float | None, floor: float | None, shown: str) -> None:
    assert ratio(value, floor) == shown


def test_row_over_its_target_is_missed_with_ratio_to_floor() -> None:
    line = format_row(FootprintRow("gpu plugin", "peak RSS idle", 73.4e6, 45e6, 40.7e6, "MB"))
    assert "73.4 MB" in line
    assert "<= 45.0 MB MISSED" in line
    assert "1.8x of floor" in line


def test_row_within_its_target_is_ok_and_times_show_seconds() -> None:
    line = format_row(FootprintRow("cd plugin", "start-to-registered", 0.5, 1.0, 0.25, "s"))
    assert "0.50 s" in line
    assert "<= 1.00 s ok" in line
    assert "2.0x of floor" in line


def test_row_without_target_or_value() -> None:
    assert "(no target)" in format_row(
        FootprintRow("floor", "peak RSS idle", 4e7, None, None, "MB")
    )
    missing = format_row(FootprintRow("cd plugin", "peak RSS", None, 4e7, 4e7, "MB"))
    assert "n/a" in missing
    assert "ok" not in missing
    assert "MISSED" not in missing


#: Libraries the plugins must not load at start, each paid on every node (docs/scale.md,
#: "Per-node footprint"): PyYAML (the plugin in its pod reads in-cluster configuration and
#: JSON), difflib (spelling hints on bad input only), NVML's bindings (first NVML use), the
#: ``kubernetes`` client (exotic kubeconfigs only).
NOT_AT_START = ("yaml", "difflib", "pynvml", "kubernetes")


@pytest.mark.parametrize("entry", ["dra_kubelet_plugin.cli", "dra_computedomain.plugin_cli"])
def test_a_plugin_starts_without_the_libraries_only_other_commands_need(entry: str) -> None:
    script = (
        f"import sys, {entry}\nprint(sorted(m for m in {NOT_AT_START!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
