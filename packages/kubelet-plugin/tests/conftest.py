"""Fixtures of the kubelet plugin tests; helpers live in kubelet_plugin_support.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubelet_core_fixtures import plugin_dirs, reference
from kubelet_plugin_support import PluginDirs, PluginProcess

__all__ = ["plugin", "plugin_dirs", "reference"]


@pytest.fixture
def plugin(plugin_dirs: PluginDirs) -> Iterator[PluginProcess]:
    """A started plugin process (fake 8xH100-80GB, directory claim source); stopped after."""
    proc = PluginProcess(plugin_dirs)
    proc.start()
    yield proc
    if proc.proc is not None and proc.proc.poll() is None:
        proc.stop()
