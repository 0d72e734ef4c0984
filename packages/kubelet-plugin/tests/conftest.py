"""Fixtures of the kubelet plugin tests; helpers live in kubelet_plugin_support.py."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubelet_plugin_support import PluginDirs, PluginProcess, ReferenceProtos


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> ReferenceProtos:
    """The independent client built from the upstream reference protos."""
    return ReferenceProtos(tmp_path_factory.mktemp("reference-protos"))


@pytest.fixture
def plugin_dirs() -> Iterator[PluginDirs]:
    """Fresh temp directories for one plugin instance.

    Short paths under /tmp: unix socket paths are limited to 107 bytes, and pytest's
    tmp_path names are long.
    """
    root = Path(tempfile.mkdtemp(prefix="kp-", dir="/tmp"))
    try:
        yield PluginDirs(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def plugin(plugin_dirs: PluginDirs) -> Iterator[PluginProcess]:
    """A started plugin process (fake 8xH100-80GB, directory claim source); stopped after."""
    proc = PluginProcess(plugin_dirs)
    proc.start()
    yield proc
    if proc.proc is not None and proc.proc.poll() is None:
        proc.stop()
