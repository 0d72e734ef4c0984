"""device_from_api: the API Device as CEL sees it."""

from __future__ import annotations

import pytest
from dra_api_types import Device, Quantity, Version
from dra_cel import CelDevice, CelRuntimeError, compile_selector, device_from_api


def _api_device(**extra: object) -> Device:
    return Device.model_validate(
        {
            "name": "gpu-0",
            "attributes": {
                "type": {"string": "gpu"},
                "index": {"int": 0},
                "driverVersion": {"version": "550.54.15"},
                "other.example.com/fast": {"bool": True},
            },
            "capacity": {"memory": {"value": "40Gi"}},
            **extra,
        }
    )


def test_unqualified_names_belong_to_the_driver_domain() -> None:
    device = device_from_api("gpu.nvidia.com", _api_device())
    assert device == CelDevice(
        driver="gpu.nvidia.com",
        attributes={
            "gpu.nvidia.com/type": "gpu",
            "gpu.nvidia.com/index": 0,
            "gpu.nvidia.com/driverVersion": Version.parse("550.54.15"),
            "other.example.com/fast": True,
        },
        capacity={"gpu.nvidia.com/memory": Quantity.parse("40Gi")},
        allow_multiple_allocations=False,
    )


def test_converted_device_evaluates_typed_values() -> None:
    device = device_from_api("gpu.nvidia.com", _api_device(allowMultipleAllocations=True))
    selector = compile_selector(
        "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))"
        " && device.attributes['gpu.nvidia.com'].index == 0"
        " && device.attributes['other.example.com'].fast"
        " && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) == 0"
        " && device.allowMultipleAllocations"
    )
    assert selector.matches(device)


def test_invalid_version_attribute_names_the_attribute() -> None:
    api = Device.model_validate(
        {"name": "gpu-0", "attributes": {"driverVersion": {"version": "550.54"}}}
    )
    with pytest.raises(CelRuntimeError, match=r"gpu\.nvidia\.com/driverVersion"):
        device_from_api("gpu.nvidia.com", api)


def test_list_valued_attributes_become_lists() -> None:
    api = Device.model_validate(
        {"name": "gpu-0", "attributes": {"peers": {"strings": ["gpu-1", "gpu-2"]}}}
    )
    device = device_from_api("gpu.nvidia.com", api)
    assert compile_selector("'gpu-2' in device.attributes['gpu.nvidia.com'].peers").matches(device)


def test_grouped_views_split_domains() -> None:
    device = device_from_api("gpu.nvidia.com", _api_device())
    assert set(device.attribute_domains) == {"gpu.nvidia.com", "other.example.com"}
    assert device.attribute_domains["absent.example.com"] == {}
    assert device.capacity_domains["gpu.nvidia.com"] == {"memory": Quantity.parse("40Gi")}
