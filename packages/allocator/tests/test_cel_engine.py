"""The allocator's CEL engine: a selector's value is shared between devices equal in what it
reads, never between devices that differ there or that fail to convert."""

from __future__ import annotations

from typing import Any

import pytest
from allocation_builders import case_objects
from dra_allocator.cel_engine import CelEngine
from dra_allocator.model import DeviceInfo, parse_objects
from dra_cel import CelRuntimeError

TYPE_IS_GPU = (
    'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].type == "gpu"'
)


def devices(*attributes: dict[str, Any]) -> list[DeviceInfo]:
    """One slice's devices with the given attributes (each its own uuid)."""
    devs = [
        {"name": f"g{i}", "attributes": {"uuid": f"GPU-{i}", **attrs}}
        for i, attrs in enumerate(attributes)
    ]
    _, slices, _, _ = parse_objects(
        case_objects({"slices": [{"name": "s", "node": "n1", "devices": devs}]})
    )
    return list(slices[0].devices)


def test_devices_equal_in_what_the_selector_reads_share_one_evaluation() -> None:
    engine = CelEngine()
    first, second = devices({"type": "gpu"}, {"type": "gpu"})
    assert engine.evaluate(TYPE_IS_GPU, first) is True
    assert first.cel_device is not None
    assert engine.evaluate(TYPE_IS_GPU, second) is True
    # Shared: the second device's CEL value was never needed.
    assert second.cel_device is None


def test_devices_that_differ_in_what_it_reads_are_evaluated_apart() -> None:
    engine = CelEngine()
    gpu, mig = devices({"type": "gpu"}, {"type": "mig"})
    assert engine.evaluate(TYPE_IS_GPU, gpu) is True
    assert engine.evaluate(TYPE_IS_GPU, mig) is False
    by_uuid = 'device.attributes["gpu.example.com"].uuid == "GPU-0"'
    assert engine.evaluate(by_uuid, gpu) is True
    assert engine.evaluate(by_uuid, mig) is False


def test_a_runtime_error_is_the_value_of_every_device_alike() -> None:
    engine = CelEngine()
    first, second = devices({"type": "gpu"}, {"type": "gpu"})
    missing = 'device.attributes["gpu.example.com"].model == "x"'
    assert isinstance(engine.evaluate(missing, first), CelRuntimeError)
    assert isinstance(engine.evaluate(missing, second), CelRuntimeError)


def test_a_device_whose_version_does_not_convert_shares_no_value() -> None:
    engine = CelEngine()
    good, bad = devices({"type": "gpu"}, {"type": "gpu"})
    # The API server refuses such a slice; a device that cannot be converted still fails
    # every selector, as upstream's, whatever the selector reads.
    bad.attributes["gpu.example.com/driverVersion"] = ("version", "5.x")
    assert engine.evaluate(TYPE_IS_GPU, good) is True
    value = engine.evaluate(TYPE_IS_GPU, bad)
    assert isinstance(value, CelRuntimeError)
    assert "invalid semantic version" in str(value)


def test_the_table_of_shared_values_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dra_allocator.cel_engine.SHARED_VALUES_MAX", 2)
    engine = CelEngine()
    devs = devices(*({"type": f"t{i}"} for i in range(5)))
    for i, dev in enumerate(devs):
        dev.attributes["gpu.example.com/driverVersion"] = ("version", f"1.0.{i}")
        assert engine.evaluate(TYPE_IS_GPU, dev) is False
    assert len(engine._shared) <= 2
    assert len(engine._versions) <= 2
