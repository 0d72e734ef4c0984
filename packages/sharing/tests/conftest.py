"""Fixtures: a fake GPU node per test (its own state file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from dra_nvlib import DeviceLibConfig, FakeDeviceLib, open_device_lib


def fake_node(tmp_path: Path, fleet: str, name: str = "sharing-node") -> FakeDeviceLib:
    """A fake node with ``fleet`` and its state below ``tmp_path``."""
    lib = open_device_lib(
        DeviceLibConfig(
            backend="fake",
            node_name=name,
            fake_fleet=fleet,
            fake_state_path=tmp_path / f"{name}.json",
        )
    )
    assert isinstance(lib, FakeDeviceLib)
    return lib


@pytest.fixture
def lib(tmp_path: Path) -> FakeDeviceLib:
    """Two H100 (MIG off), one A100 with MIG on, one L4 (no MIG)."""
    return fake_node(tmp_path, "2xH100-80GB,1xA100-40GB:mig,1xL4")


@pytest.fixture
def make_node(tmp_path: Path) -> Callable[[str], FakeDeviceLib]:
    """Build a fake node of a given fleet (``"1xA100-40GB:mig"``)."""
    return lambda fleet: fake_node(tmp_path, fleet, name="node-" + str(abs(hash(fleet)) % 9999))
