"""Simulated nodes' ResourceSlices: the GPU plugin's own slices, published by its publisher."""

from __future__ import annotations

from dra_api_types import ResourceSlice
from dra_e2e.kwok_cluster import create_kwok_node, next_index
from dra_e2e.kwok_slices import (
    A100_MIG,
    FLEET_MIX,
    GB200,
    H100,
    fleet_of,
    plugin_settings,
    publish_channel_slices,
    publish_node_slices,
)
from dra_kube_client.testing import MemoryApi
from dra_kubelet_core.metrics import PluginMetrics


def _devices(api: MemoryApi, node: str, driver: str = "gpu.nvidia.com") -> list[dict[str, object]]:
    slices = [
        s
        for s in api.kind_items("resourceslices")
        if s["spec"]["nodeName"] == node and s["spec"]["driver"] == driver
    ]
    return [d for s in slices for d in s["spec"].get("devices") or []]


def _attr(device: dict[str, object], name: str) -> str:
    attributes = device["attributes"]
    assert isinstance(attributes, dict)
    return str(next(iter(attributes[name].values())))


def test_fleet_mix_cycles_through_every_kind() -> None:
    assert [fleet_of(i) for i in range(6)] == [GB200, H100, A100_MIG] * 2
    assert A100_MIG.spec(8) == "8xA100-40GB:mig=3g.20gb/2x1g.5gb"
    assert {k.name for k in FLEET_MIX} == {"gb200", "h100", "a100-mig"}


def test_next_index_follows_the_highest_kwok_node() -> None:
    assert next_index([]) == 0
    assert next_index(["kwok-node-0", "kwok-node-7", "e2e-node-0", "kwok-node-x"]) == 8


def test_publishing_writes_the_plugins_valid_slices_once() -> None:
    api = MemoryApi()
    settings = plugin_settings("kwok-node-1", H100.spec(8))
    assert publish_node_slices(api, settings, node_uid="uid-1")
    (stored,) = api.kind_items("resourceslices")
    parsed = ResourceSlice.from_dict(stored, validate=True)
    assert parsed.spec.driver == "gpu.nvidia.com"
    assert parsed.spec.node_name == "kwok-node-1"
    assert [d.name for d in parsed.spec.devices or []] == [f"gpu-{i}" for i in range(8)]
    owner = stored["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", "kwok-node-1", "uid-1")
    # The publisher's reconcile: the second time there is nothing to write.
    assert not publish_node_slices(api, settings, node_uid="uid-1")


def test_mig_nodes_publish_their_mig_devices() -> None:
    api = MemoryApi()
    publish_node_slices(api, plugin_settings("kwok-node-2", A100_MIG.spec(2)))
    devices = _devices(api, "kwok-node-2")
    profiles = sorted(_attr(d, "profile") for d in devices if _attr(d, "type") == "mig")
    assert profiles == ["1g.5gb"] * 4 + ["3g.20gb"] * 2


def test_each_node_gets_its_own_devices_and_node_object() -> None:
    api = MemoryApi()
    metrics = PluginMetrics()
    names = [create_kwok_node(api, i, 2, metrics) for i in range(3)]
    assert names == ["kwok-node-0", "kwok-node-1", "kwok-node-2"]
    nodes = api.kind_items("nodes")
    assert [n["metadata"]["labels"]["dra-e2e/fleet"] for n in nodes] == [
        "gb200",
        "h100",
        "a100-mig",
    ]
    uuids = [_attr(d, "uuid") for name in names for d in _devices(api, name)]
    assert len(uuids) == len(set(uuids)) > 6
    drivers = {}
    for name, node in zip(names, nodes, strict=True):
        owned = [s for s in api.kind_items("resourceslices") if s["spec"]["nodeName"] == name]
        assert {s["metadata"]["ownerReferences"][0]["uid"] for s in owned} == {
            node["metadata"]["uid"]
        }
        drivers[name] = sorted(s["spec"]["driver"] for s in owned)
    # Only the NVLink kind (GB200) carries the compute-domain plugin's channel.
    assert drivers == {
        "kwok-node-0": ["compute-domain.nvidia.com", "gpu.nvidia.com"],
        "kwok-node-1": ["gpu.nvidia.com"],
        "kwok-node-2": ["gpu.nvidia.com"],
    }
    channel = _devices(api, "kwok-node-0", "compute-domain.nvidia.com")
    assert sorted((str(d["name"]), _attr(d, "type")) for d in channel) == [
        ("channel-0", "channel"),
        ("daemon-0", "daemon"),
    ]


def test_channel_slices_are_the_plugins_and_published_once() -> None:
    api = MemoryApi()
    assert publish_channel_slices(api, "kwok-node-3", node_uid="uid-3")
    (stored,) = api.kind_items("resourceslices")
    parsed = ResourceSlice.from_dict(stored, validate=True)
    assert (parsed.spec.driver, parsed.spec.node_name) == (
        "compute-domain.nvidia.com",
        "kwok-node-3",
    )
    assert parsed.spec.pool.name == "kwok-node-3"
    assert not publish_channel_slices(api, "kwok-node-3", node_uid="uid-3")
