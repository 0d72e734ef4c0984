"""The plain-slice reader gives the model path's record, and leaves everything else to it."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from allocation_builders import case_objects, resource_slice
from dra_allocator.errors import AllocationError
from dra_allocator.model import SliceInfo, parse_model, read_model
from dra_allocator.plain_slices import read_plain_slice
from dra_allocator.snapshot import read_object

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "conformance" / "cases.yaml").read_text(encoding="utf-8")
)
# Records of the device that say nothing about what the JSON held (back reference, caches).
_DEVICE_SKIP = {"slice", "selector_cache", "cel_device"}


def _model_record(data: Mapping[str, Any]) -> SliceInfo:
    record = parse_model(read_model(data, where="test ResourceSlice"))
    assert isinstance(record, SliceInfo)
    return record


def _as_tuple(info: SliceInfo) -> tuple[object, ...]:
    """Every field of the record, its devices' included, comparable with ``==``."""
    devices = tuple(
        tuple((f.name, getattr(dev, f.name)) for f in fields(dev) if f.name not in _DEVICE_SKIP)
        # Quantities compare by value: their written form too (what results copy).
        + tuple((k, str(c.quantity)) for k, c in dev.capacity.items())
        for dev in info.devices
    )
    top = tuple((f.name, getattr(info, f.name)) for f in fields(info) if f.name != "devices")
    return top, devices


def _all_slices() -> list[dict[str, Any]]:
    return [obj for case in CASES for obj in case_objects(case) if obj["kind"] == "ResourceSlice"]


def test_plain_slices_read_as_the_models_read_them() -> None:
    slices = _all_slices()
    plain = [(s, read_plain_slice(s)) for s in slices]
    read = [(s, p) for s, p in plain if p is not None]
    assert len(read) > len(slices) // 2  # most of the table's slices are plain
    for data, record in read:
        assert record is not None
        assert _as_tuple(record) == _as_tuple(_model_record(data)), data["metadata"]["name"]


def test_the_plugins_gpu_slice_reads_as_with_the_models() -> None:
    gpu = {
        "name": "gpu-0",
        "attributes": {
            "productName": {"string": "NVIDIA GB200"},
            "cudaComputeCapability": {"version": "10.0.0"},
            "resource.kubernetes.io/numaNode": {"int": 0},
            "type": {"string": "gpu"},
            "gpu.nvidia.com/type": {"string": "qualified wins"},
            "healthy": {"bool": True},
        },
        "capacity": {"memory": {"value": "189471Mi"}, "cores": {"value": " 2 "}},
    }
    data = resource_slice({"name": "node-a", "node": "node-a", "driver": "gpu.nvidia.com"})
    data["spec"]["devices"] = [gpu, {"name": "bare"}]
    data["metadata"].update(uid="u-1", resourceVersion="7", generateName="node-a-")
    record = read_plain_slice(data)
    assert record is not None
    assert record.devices[0].attributes["gpu.nvidia.com/type"] == ("string", "qualified wins")
    assert _as_tuple(record) == _as_tuple(_model_record(data))


def _changed(path: str, value: object) -> dict[str, Any]:
    """A plain slice with the value at ``path`` (dotted, list indices as numbers) set."""
    data = resource_slice(
        {
            "name": "s",
            "node": "n",
            "devices": [{"name": "d", "attributes": {"a": 1}, "capacity": {"m": "1Gi"}}],
        }
    )
    data = copy.deepcopy(data)
    *parents, last = path.split(".")
    target: Any = data
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    target[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("spec.devices.0.attributes.a", {"int": True}),  # strict: a bool is not an int
        ("spec.devices.0.attributes.a", {"bool": 1}),
        ("spec.devices.0.attributes.a", {"int": None}),  # null: unset, as Go reads it
        ("spec.devices.0.attributes.a", {"ints": [1, 2]}),
        ("spec.devices.0.attributes.a", {"ints": []}),
        ("spec.devices.0.attributes.a", {"int": 1, "string": "x"}),
        ("spec.devices.0.attributes.a", {"future": 1}),
        ("spec.devices.0.capacity.m", {"value": "1Gi", "requestPolicy": {"default": "1"}}),
        ("spec.devices.0.capacity.m", {"value": 5}),
        ("spec.devices.0.capacity.m", {"value": "lots"}),
        ("spec.devices.0.taints", [{"key": "k", "effect": "NoSchedule"}]),
        ("spec.devices.0.allowMultipleAllocations", True),
        ("spec.devices.0.future", 1),
        ("spec.devices.0.name", None),
        ("spec.pool.generation", True),
        ("spec.pool.generation", "1"),
        ("spec.nodeName", None),
        ("spec.sharedCounters", [{"name": "c", "counters": {"x": {"value": "1"}}}]),
        ("spec.devices", None),
        ("metadata.labels", {"a": 1}),
        ("metadata", None),
        ("status", {}),
    ],
)
def test_anything_else_is_left_to_the_models(path: str, value: object) -> None:
    data = _changed(path, value)
    assert read_plain_slice(data) is None
    # What read_object makes of it is then the model path's: its record, or its error.
    expected = _model_outcome(data)
    try:
        got: object = read_object(data, where="test")
    except AllocationError as exc:
        got = f"error: {exc}"
    assert (_as_tuple(got) if isinstance(got, SliceInfo) else got) == expected


def _model_outcome(data: Mapping[str, Any]) -> object:
    """The model path's record of ``data`` (as a tuple), or its error (as a string)."""
    try:
        return _as_tuple(_model_record(data))
    except AllocationError as exc:
        return f"error: {exc}"
