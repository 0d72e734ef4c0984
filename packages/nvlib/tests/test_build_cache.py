"""The shared build cache convention: keys, root, build once, nothing half-built reused."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_nvlib.build_cache import build_once, cache_root, content_key, is_complete


def test_key_covers_file_names_contents_and_parts(tmp_path: Path) -> None:
    source = tmp_path / "main.go"
    source.write_text("package main\n")
    key = content_key("tool", "v1.2.3", [source], ["-s", "-w"])
    assert key.startswith("tool-v1.2.3-")
    assert len(key.rsplit("-", 1)[1]) == 12
    assert content_key("tool", "v1.2.3", [source], ["-s", "-w"]) == key
    assert content_key("tool", "v1.2.3", [source], ["-s"]) != key
    source.write_text("package main // changed\n")
    assert content_key("tool", "v1.2.3", [source], ["-s", "-w"]) != key


def test_root_is_the_override_then_xdg_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRA_TEST_CACHE", str(tmp_path / "override"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root("DRA_TEST_CACHE", "dra-test") == tmp_path / "override"
    monkeypatch.delenv("DRA_TEST_CACHE")
    assert cache_root("DRA_TEST_CACHE", "dra-test") == tmp_path / "xdg" / "dra-test"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_root("DRA_TEST_CACHE", "dra-test") == Path.home() / ".cache" / "dra-test"


def test_builds_once_and_never_reuses_a_failed_build(tmp_path: Path) -> None:
    entry = tmp_path / "tool-v1-abc"
    calls: list[Path] = []

    def failing(staging: Path) -> None:
        (staging / "half").write_text("x")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        build_once(entry, failing, marker="v1\n")
    assert not entry.exists()
    assert not is_complete(entry)

    def good(staging: Path) -> None:
        calls.append(staging)
        assert not (staging / "half").exists()  # the failed attempt's files are gone
        (staging / "tool").write_text("binary")

    assert build_once(entry, good, marker="v1\n") == entry
    assert build_once(entry, good, marker="v1\n") == entry
    assert len(calls) == 1
    assert (entry / "tool").read_text() == "binary"
    assert (entry / ".complete").read_text() == "v1\n"
    assert not entry.with_name(entry.name + ".partial").exists()
