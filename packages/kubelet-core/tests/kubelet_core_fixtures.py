"""Fixtures shared by the core's and the GPU plugin's tests (their conftests import them)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubelet_core_support import PluginDirs, ReferenceProtos

__all__ = ["plugin_dirs", "reference"]


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
