"""What of ``device`` a compiled selector reads (its footprint), and when it cannot say."""

from __future__ import annotations

import pytest
from dra_cel import Footprint, compile_selector

GPU_CLASS = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"


def test_the_gpu_class_reads_the_driver_and_one_attribute() -> None:
    assert compile_selector(GPU_CLASS).footprint == Footprint(
        driver=True, attributes=("gpu.nvidia.com/type",)
    )


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (
            'device.attributes["a.example.com"]["model"] == "x"',
            Footprint(attributes=("a.example.com/model",)),
        ),
        (
            "has(device.attributes['a.example.com'].model)",
            Footprint(attributes=("a.example.com/model",)),
        ),
        (
            "device.capacity['a.example.com'].memory.compareTo(quantity('1Gi')) >= 0",
            Footprint(capacity=("a.example.com/memory",)),
        ),
        (
            "'model' in device.attributes['a.example.com']",
            Footprint(attribute_domains=("a.example.com",)),
        ),
        (
            "size(device.capacity['a.example.com']) > 1",
            Footprint(capacity_domains=("a.example.com",)),
        ),
        ("device.allowMultipleAllocations", Footprint(allow_multiple=True)),
        ("true", Footprint()),
        (
            "[1, 2].all(x, x > 0) && device.attributes['b.example.com'].n > 1",
            Footprint(attributes=("b.example.com/n",)),
        ),
    ],
)
def test_constant_reads_are_named(expression: str, expected: Footprint) -> None:
    assert compile_selector(expression).footprint == expected


@pytest.mark.parametrize(
    "expression",
    [
        # The whole attribute map, a domain picked at run time, a macro's own ``device``.
        "device.attributes.exists(d, d == 'a.example.com')",
        "device.attributes[device.driver].model == 'x'",
        "['x'].all(device, device == 'x')",
        "cel.bind(device, 'x', device == 'x')",
    ],
)
def test_other_uses_of_device_have_no_footprint(expression: str) -> None:
    assert compile_selector(expression).footprint is None
