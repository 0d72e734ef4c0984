"""Dynamic MIG counters and placements, checked against the fake backend's MIG rules.

The differential test is the point: for every model, any set of placements the counters
admit is exactly a set the fake GPU (which refuses what ``nvidia-smi mig -lgipp`` placements
and the hardware refuse) can create, and every placement the counters refuse next, the fake
GPU refuses too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from dra_api_types import ResourceSlice
from dra_nvlib import FakeDeviceLib, InsufficientResourcesError, InvalidArgumentError
from dra_sharing import (
    MigOffer,
    counter_set_json,
    full_gpu_consumption,
    mig_offers,
    partitionable,
    split_layout,
)
from dra_sharing.partitionable import full_gpu_capacity


def _counters(cs: dict[str, Any]) -> dict[str, int]:
    out = {}
    for name, c in cs["counters"].items():
        value = c["value"]
        out[name] = int(value[:-2]) if value.endswith("Mi") else int(value)
    return out


def _fits(total: dict[str, int], used: dict[str, int], offer: MigOffer) -> bool:
    need = _counters(offer.consumption())
    return all(used.get(k, 0) + v <= total[k] for k, v in need.items())


def test_a100_counter_set_and_placements(make_node: Callable[[str], FakeDeviceLib]) -> None:
    gpu = make_node("1xA100-40GB").gpus()[0]
    cs = counter_set_json(gpu)
    assert cs["name"] == "gpu-0-counter-set"
    counters = _counters(cs)
    assert [k for k in counters if k.startswith("memory-slice-")] == [
        f"memory-slice-{i}" for i in range(8)
    ]
    assert counters["multiprocessors"] == 98
    assert counters["ofa-engines"] == 1
    offers = mig_offers(gpu)
    # `nvidia-smi mig -lgipp` on A100: 7+7+4+3+2+1+1 placements.
    assert len(offers) == 25
    names = {o.name for o in offers}
    assert "gpu-0-mig-1g5gb-19-6" in names
    assert "gpu-0-mig-1g5gb-me-20-0" in names
    assert "gpu-0-mig-7g40gb-0-0" in names
    three = next(o for o in offers if o.name == "gpu-0-mig-3g20gb-9-4")
    consumed = three.consumption()["counters"]
    assert [k for k in consumed if k.startswith("memory-slice")] == [
        "memory-slice-4",
        "memory-slice-5",
        "memory-slice-6",
        "memory-slice-7",
    ]
    assert three.capacity()["memorySlice4"] == {"value": "1"}
    assert full_gpu_consumption(gpu)["counters"] == cs["counters"]
    assert full_gpu_capacity(gpu)["multiprocessors"] == {"value": "98"}


def test_gpus_without_mig_publish_no_counters(make_node: Callable[[str], FakeDeviceLib]) -> None:
    gpu = make_node("1xL4").gpus()[0]
    assert not partitionable(gpu)
    assert mig_offers(gpu) == []


@pytest.mark.parametrize("model", ["A100-40GB", "A100-80GB", "H100-80GB", "H200", "GB200"])
def test_counters_admit_exactly_what_the_gpu_creates(
    make_node: Callable[[str], FakeDeviceLib], model: str
) -> None:
    lib = make_node(f"1x{model}:mig")
    gpu = lib.gpus()[0]
    offers = mig_offers(gpu)
    total = _counters(counter_set_json(gpu))
    rng = random.Random(f"{model}-4815")
    for _round in range(8):
        for mig in lib.gpu(gpu.uuid).mig_devices:
            lib.destroy_mig_device(mig.uuid)
        used: dict[str, int] = {}
        for offer in rng.sample(offers, len(offers)):
            if _fits(total, used, offer):
                lib.create_mig_device(
                    gpu.uuid, profile_id=offer.profile.profile_id, placement_start=offer.start
                )
                for k, v in _counters(offer.consumption()).items():
                    used[k] = used.get(k, 0) + v
            else:
                with pytest.raises((InsufficientResourcesError, InvalidArgumentError)):
                    lib.create_mig_device(
                        gpu.uuid,
                        profile_id=offer.profile.profile_id,
                        placement_start=offer.start,
                    )


def _device(name: str) -> dict[str, Any]:
    return {"name": name}


def test_split_and_combined_layouts(make_node: Callable[[str], FakeDeviceLib]) -> None:
    gpus = make_node("2xH100-80GB").gpus()
    per_gpu = [(counter_set_json(g), [_device(f"gpu-{g.minor}")]) for g in gpus]
    split = split_layout(per_gpu, split=True)
    assert len(split) == 3
    assert [cs["name"] for cs in split[0]["sharedCounters"]] == [
        "gpu-0-counter-set",
        "gpu-1-counter-set",
    ]
    assert "devices" not in split[0]
    assert [b["devices"][0]["name"] for b in split[1:]] == ["gpu-0", "gpu-1"]
    combined = split_layout(per_gpu, split=False)
    assert len(combined) == 2
    assert combined[1]["sharedCounters"][0]["name"] == "gpu-1-counter-set"


def test_offer_json_decodes_as_v1(make_node: Callable[[str], FakeDeviceLib]) -> None:
    gpu = make_node("1xH100-80GB").gpus()[0]
    offer = mig_offers(gpu)[0]
    ResourceSlice.from_dict(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "s"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": "n",
                "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                "sharedCounters": [counter_set_json(gpu)],
                "devices": [
                    {
                        "name": offer.name,
                        "capacity": offer.capacity(),
                        "consumesCounters": [offer.consumption()],
                    }
                ],
            },
        }
    )
