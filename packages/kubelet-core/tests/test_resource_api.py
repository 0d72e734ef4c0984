"""The resource.k8s.io version found by discovery, and the conversions at the API edge."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from dra_api_types import ResourceClaim, ResourceSlice
from dra_api_types.beta_to_v1 import convert_to_v1
from dra_api_types.v1_to_beta import convert_slice_from_v1
from dra_kube_client import KubeApiError
from dra_kube_client.testing import Answer, Call, MockTransport
from dra_kubelet_core.resource_api import (
    ResourceApi,
    UnsupportedResourceApiError,
    discover_resource_api,
    pick_version,
)


def _group(*versions: str) -> dict[str, Any]:
    return {
        "kind": "APIGroup",
        "name": "resource.k8s.io",
        "versions": [{"groupVersion": f"resource.k8s.io/{v}", "version": v} for v in versions],
        "preferredVersion": {"version": versions[0]} if versions else {},
    }


@pytest.mark.parametrize(
    ("served", "picked"),
    [
        (("v1", "v1beta2", "v1beta1"), "v1"),  # 1.34+
        (("v1beta2", "v1beta1", "v1alpha3"), "v1beta2"),  # 1.33
        (("v1beta1", "v1alpha3"), "v1beta1"),  # 1.32
        (("v1beta1", "v1"), "v1"),  # the GA API wins whatever the server prefers
    ],
)
def test_pick_version(served: tuple[str, ...], picked: str) -> None:
    assert pick_version(_group(*served)) == picked


def test_no_supported_version_is_a_clear_error() -> None:
    with pytest.raises(UnsupportedResourceApiError, match=r"serves: v1alpha3.*1\.32 or newer"):
        pick_version(_group("v1alpha3"))


def _transport(answer: dict[str, Any] | None = None, status: int = 0) -> MockTransport:
    def handler(call: Call) -> Answer:
        if status:
            raise KubeApiError(call.method, call.path, status, "not found")
        return answer or {}

    return MockTransport(handler)


def test_discovery_asks_the_group_and_a_missing_group_is_unsupported() -> None:
    transport = _transport(_group("v1beta2", "v1beta1"))
    api = discover_resource_api(transport)
    assert [c.path for c in transport.calls] == ["/apis/resource.k8s.io"]
    assert api == ResourceApi("v1beta2")
    assert api.api_version == "resource.k8s.io/v1beta2"
    with pytest.raises(UnsupportedResourceApiError, match="DynamicResourceAllocation"):
        discover_resource_api(_transport(status=404))


V1_SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "n1-gpu.nvidia.com-abc"},
    "spec": {
        "driver": "gpu.nvidia.com",
        "nodeName": "n1",
        "pool": {"name": "n1", "generation": 2, "resourceSliceCount": 1},
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {
                    "type": {"string": "gpu"},
                    "resource.kubernetes.io/numaNode": {"int": 0},
                },
                "capacity": {"memory": {"value": "40Gi"}},
                "taints": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}],
            }
        ],
    },
}


@pytest.mark.parametrize("version", ["v1", "v1beta2", "v1beta1"])
def test_slices_written_in_the_served_version_read_back_as_the_same_v1(version: str) -> None:
    api = ResourceApi(version)
    body = api.slice_from_v1(V1_SLICE)
    assert body["apiVersion"] == f"resource.k8s.io/{version}"
    device = body["spec"]["devices"][0]
    if version == "v1beta1":
        assert set(device) == {"name", "basic"}
        assert device["basic"]["capacity"] == {"memory": {"value": "40Gi"}}
    else:
        assert device == V1_SLICE["spec"]["devices"][0]
    stored = {k: v for k, v in body.items() if k not in ("apiVersion", "kind")}  # list items
    back = api.to_v1(stored, "ResourceSlice")
    assert back == V1_SLICE
    ResourceSlice.from_dict(back, validate=True)
    assert V1_SLICE["spec"]["devices"][0]["name"] == "gpu-0"  # input unchanged


def test_v1beta1_claim_reads_as_v1() -> None:
    beta = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "n1",
                            "device": "gpu-0",
                        }
                    ]
                }
            }
        },
    }
    claim = ResourceClaim.from_dict(ResourceApi("v1beta1").to_v1(beta, "ResourceClaim"))
    (request,) = claim.spec.devices.requests or []
    assert request.exactly is not None
    assert request.exactly.device_class_name == "gpu.nvidia.com"


def test_converting_a_non_v1_slice_is_an_error_naming_the_object() -> None:
    beta = copy.deepcopy(V1_SLICE)
    beta["apiVersion"] = "resource.k8s.io/v1beta1"
    with pytest.raises(ValueError, match="ResourceSlice"):
        convert_slice_from_v1(beta, "resource.k8s.io/v1beta1")
    with pytest.raises(ValueError, match="v1alpha3"):
        convert_slice_from_v1(V1_SLICE, "resource.k8s.io/v1alpha3")
    assert convert_to_v1(convert_slice_from_v1(V1_SLICE, "resource.k8s.io/v1beta1")) == V1_SLICE


class _BetaServer:
    """An API server speaking only one beta version: stores slices as it would."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.objects: dict[str, dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        self._rv = 0
        self.transport = MockTransport(self.answer)

    @property
    def requests(self) -> list[tuple[str, str]]:
        return [(c.method, c.path) for c in self.transport.calls if c.method != "WATCH"]

    def answer(self, call: Call) -> Answer:
        method, path, body = call.method, call.path, call.body
        if method == "WATCH":
            return ()
        base = f"/apis/resource.k8s.io/{self.version}/resourceslices"
        if path.startswith(f"/apis/resource.k8s.io/{self.version}/namespaces/"):
            return self.claims[path.rsplit("/", 1)[1]]
        assert path.startswith(base), path
        if method == "GET":
            # List items carry neither apiVersion nor kind.
            return {
                "items": [
                    {k: v for k, v in o.items() if k not in ("apiVersion", "kind")}
                    for o in self.objects.values()
                ]
            }
        assert isinstance(body, dict)
        assert body["apiVersion"] == f"resource.k8s.io/{self.version}"
        self._rv += 1
        obj = copy.deepcopy(body)
        meta = obj["metadata"]
        if method == "POST":
            meta["name"] = meta.pop("generateName") + str(self._rv)
        meta["resourceVersion"] = str(self._rv)
        self.objects[meta["name"]] = obj
        stored: dict[str, Any] = obj
        return stored


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_publisher_speaks_the_served_beta_version_and_settles(version: str, tmp_path: Any) -> None:
    from dra_kubelet_core.health import HealthHub
    from dra_kubelet_core.metrics import PluginMetrics
    from dra_kubelet_core.publisher import SlicePublisher
    from dra_kubelet_plugin.inventory import build_inventory
    from dra_kubelet_plugin.slices import SliceSpec, gpu_slice_source
    from dra_nvlib import DeviceLibConfig, open_device_lib

    config = DeviceLibConfig(
        backend="fake", node_name="n1", fake_fleet="2xH100-80GB", fake_state_path=tmp_path / "f"
    )
    with open_device_lib(config) as lib:
        devices = build_inventory(lib.gpus())
    spec = SliceSpec(driver_name="gpu.nvidia.com", node_name="n1", node_uid="uid-1")
    server = _BetaServer(version)
    hub = HealthHub("n1")
    publisher = SlicePublisher(
        transport=server.transport,
        driver_name="gpu.nvidia.com",
        node_name="n1",
        slices=gpu_slice_source(spec, lambda: devices, hub),
        health=hub,
        metrics=PluginMetrics(),
        api=ResourceApi(version),
    )
    assert publisher.reconcile_once()
    (stored,) = server.objects.values()
    device = stored["spec"]["devices"][0]
    if version == "v1beta1":
        assert set(device) == {"name", "basic"}
        assert "resource.kubernetes.io/numaNode" in device["basic"]["attributes"]
    else:
        assert "attributes" in device
    # Read back through the same conversion: nothing to change, no second write.
    assert not publisher.reconcile_once()
    assert [m for m, _ in server.requests] == ["GET", "POST", "GET"]


def test_claims_are_read_in_the_served_version() -> None:
    import asyncio

    from dra_kubelet_core.claim_source import KubeClaimSource

    server = _BetaServer("v1beta1")
    server.claims["c"] = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}},
    }
    claim = asyncio.run(KubeClaimSource(server.transport, ResourceApi("v1beta1")).get("ns", "c"))
    assert claim is not None
    assert server.requests == [
        ("GET", "/apis/resource.k8s.io/v1beta1/namespaces/ns/resourceclaims/c")
    ]
    (request,) = claim.spec.devices.requests or []
    assert request.exactly is not None
