"""The day-two scenarios' numbers reach the chaos benchmark through one file: each test's
``chaos_record`` appends a line named after the test when ``$DRA_E2E_CHAOS_RESULTS`` is set,
and prints it either way (no cluster needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dra_e2e.chaos_results import RESULTS_ENV, ChaosRecord, read_results, record_numbers


def test_numbers_are_appended_one_line_per_record(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    env = {RESULTS_ENV: str(results)}
    record_numbers("test_surge", {"failed_prepares": 0, "upgrade_s": 41.5}, env=env)
    record_numbers("test_lost", {"taint_s": 3.2}, env=env)
    assert read_results(results) == [
        {"scenario": "test_surge", "failed_prepares": 0, "upgrade_s": 41.5},
        {"scenario": "test_lost", "taint_s": 3.2},
    ]


def test_without_the_variable_the_numbers_are_only_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = record_numbers("test_kill", {"plugin_recovery_s": 9.0}, env={})
    line = capsys.readouterr().out.strip()
    assert line.startswith("[chaos] ")
    assert json.loads(line.removeprefix("[chaos] ")) == entry
    assert list(tmp_path.iterdir()) == []
    assert read_results(tmp_path / "missing.jsonl") == []


def test_the_fixture_names_the_entry_after_the_test(
    chaos_record: ChaosRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results.jsonl"
    monkeypatch.setenv(RESULTS_ENV, str(results))
    chaos_record(stuck=0)
    assert read_results(results) == [
        {"scenario": "test_the_fixture_names_the_entry_after_the_test", "stuck": 0}
    ]
