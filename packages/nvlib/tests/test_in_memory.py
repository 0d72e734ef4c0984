"""An in-memory fake node (``fake_state_store="memory"``): a whole node in one process,
nothing written, changes kept for that process's lifetime."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_nvlib import ConfigError, DeviceLibConfig, FakeDeviceLib, open_device_lib


def test_an_in_memory_node_keeps_changes_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    config = DeviceLibConfig(
        backend="fake", node_name="n1", fake_fleet="1xA100-40GB:mig", fake_state_store="memory"
    )
    with open_device_lib(config) as lib:
        assert isinstance(lib, FakeDeviceLib)
        (gpu,) = lib.gpus()
        mig = lib.create_mig_device(gpu.uuid, profile_id=19, placement_start=0)
        assert [m.uuid for m in lib.gpus()[0].mig_devices] == [mig.uuid]
        bus = lib.pci_bus()
        assert bus.exists()
    assert list(tmp_path.iterdir()) == []
    # Another node of another fleet: nothing of the first is left to refuse it.
    other = DeviceLibConfig(
        backend="fake", node_name="n1", fake_fleet="2xL4", fake_state_store="memory"
    )
    with open_device_lib(other) as lib:
        assert [g.product_name for g in lib.gpus()] == ["NVIDIA L4", "NVIDIA L4"]


@pytest.mark.parametrize(
    ("fleet", "state"), [(None, None), ("1xL4", Path("/x/state.json")), (None, Path("/x"))]
)
def test_an_in_memory_node_needs_a_fleet_and_no_state_file(
    fleet: str | None, state: Path | None
) -> None:
    with pytest.raises(ConfigError) as err:
        DeviceLibConfig(
            backend="fake",
            node_name="n1",
            fake_fleet=fleet,
            fake_state_path=state,
            fake_state_store="memory",
        )
    assert err.value.field in ("fake_state_store", "fake_fleet")
