"""Consumable shares: the flag's values and the published device fields per mode."""

from __future__ import annotations

from typing import Any

import pytest
from dra_api_types import ResourceSlice
from dra_sharing import (
    ConsumableMode,
    ConsumableShares,
    ConsumableSharesError,
    parse_consumable_shares,
)

GIB = 1024**3


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", ConsumableShares()),
        ("disabled", ConsumableShares()),
        ("memory", ConsumableShares(ConsumableMode.MEMORY)),
        ("Unlimited", ConsumableShares(ConsumableMode.UNLIMITED)),
        ("4", ConsumableShares(ConsumableMode.SHARES, 4)),
    ],
)
def test_parse(value: str, expected: ConsumableShares) -> None:
    assert parse_consumable_shares(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "half", "4.5"])
def test_parse_refuses_other_values(value: str) -> None:
    with pytest.raises(ConsumableSharesError, match="--consumable-shares"):
        parse_consumable_shares(value)


def _device() -> dict[str, Any]:
    return {"name": "gpu-0", "capacity": {"memory": {"value": "80Gi"}}}


def _valid(device: dict[str, Any]) -> None:
    # The shaped device must decode as a resource.k8s.io/v1 Device.
    ResourceSlice.from_dict(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "n",
                "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                "devices": [device],
            },
        }
    )


def test_disabled_leaves_the_device_alone() -> None:
    assert ConsumableShares().shape_device(_device(), 80 * GIB) == _device()


def test_memory_mode_defaults_to_the_whole_gpu() -> None:
    out = ConsumableShares(ConsumableMode.MEMORY).shape_device(_device(), 80 * GIB + 5)
    assert out["allowMultipleAllocations"] is True
    assert out["capacity"]["memory"] == {
        "value": "81920Mi",
        "requestPolicy": {
            "default": "81920Mi",
            "validRange": {"min": "1Mi", "max": "81920Mi", "step": "1Mi"},
        },
    }
    _valid(out)


def test_unlimited_mode_defaults_to_nothing() -> None:
    out = ConsumableShares(ConsumableMode.UNLIMITED).shape_device(_device(), 80 * GIB)
    policy = out["capacity"]["memory"]["requestPolicy"]
    assert policy == {"default": "0", "validRange": {"min": "0", "max": "81920Mi", "step": "1Mi"}}
    assert "shares" not in out["capacity"]
    _valid(out)


def test_integer_mode_adds_n_shares() -> None:
    out = ConsumableShares(ConsumableMode.SHARES, 4).shape_device(_device(), 80 * GIB)
    assert out["capacity"]["shares"] == {
        "value": "4",
        "requestPolicy": {"default": "1", "validRange": {"min": "1", "max": "4", "step": "1"}},
    }
    assert out["capacity"]["memory"]["requestPolicy"]["default"] == "0"
    assert str(ConsumableShares(ConsumableMode.SHARES, 4)) == "4"
    _valid(out)
