"""The test builders give objects the typed models accept, with only the fields asked for."""

from __future__ import annotations

import pytest
from dra_api_types import DeviceClass, ResourceClaim, ResourceSlice
from dra_api_types.testing import (
    allocation,
    device_class,
    device_result,
    exactly,
    opaque_config,
    pod,
    resource_claim,
    resource_slice,
)

CONFIG = opaque_config(
    "gpu.nvidia.com",
    {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"},
    requests=["gpu"],
)


def test_an_allocated_claim_validates_and_reads_back() -> None:
    raw = resource_claim(
        "c1",
        namespace="team",
        uid="u1",
        resource_version="3",
        requests=[exactly("gpu", count=2, selectors=["device.driver == 'gpu.nvidia.com'"])],
        config=[CONFIG],
        allocation=allocation(
            [device_result("gpu-0", pool="node-1"), device_result("gpu-1", pool="node-1")],
            config=[{**CONFIG, "source": "FromClaim"}],
            node="node-1",
        ),
    )
    claim = ResourceClaim.from_dict(raw, validate=True)
    assert claim.metadata.uid == "u1"
    (request,) = claim.spec.devices.requests or []
    assert request.exactly is not None
    assert request.exactly.count == 2
    assert claim.status is not None
    assert claim.status.allocation is not None
    results = claim.status.allocation.devices.results or []
    assert [r.device for r in results] == ["gpu-0", "gpu-1"]
    terms = raw["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert terms[0]["matchFields"][0]["values"] == ["node-1"]


def test_only_the_fields_asked_for_are_written() -> None:
    assert resource_claim("c", requests=[exactly()]) == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    assert device_result("g", pool="p", admin_access=True)["adminAccess"] is True
    assert "adminAccess" not in device_result("g", pool="p")


def test_a_claim_takes_an_allocation_or_a_status_not_both() -> None:
    with pytest.raises(ValueError, match="claim ns/c: give allocation or status"):
        resource_claim("c", namespace="ns", allocation=allocation([]), status={})


def test_class_and_slice_validate() -> None:
    cls = DeviceClass.from_dict(
        device_class(
            "gpu.nvidia.com",
            selectors=["device.driver == 'gpu.nvidia.com'"],
            config=[opaque_config("gpu.nvidia.com", {"kind": "GpuConfig"})],
            extended_resource_name="nvidia.com/gpu",
            resource_version="1",
        ),
        validate=True,
    )
    assert cls.spec.extended_resource_name == "nvidia.com/gpu"
    raw = resource_slice(
        "n1-slice",
        pool="n1",
        node_name="n1",
        devices=[{"name": "gpu-0"}],
        generation=4,
        spec={"perDeviceNodeSelection": None},
    )
    raw["spec"].pop("perDeviceNodeSelection")
    sl = ResourceSlice.from_dict(raw, validate=True)
    assert (sl.spec.node_name, sl.spec.pool.generation) == ("n1", 4)
    shared = resource_slice("s", pool="p", spec={"allNodes": True})
    assert shared["spec"]["allNodes"] is True
    assert "nodeName" not in shared["spec"]


def test_a_pod_names_its_claims() -> None:
    obj = pod("p", namespace="team", claims={"gpu": "c1"}, status={"phase": "Pending"})
    assert obj["spec"] == {
        "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}],
        "containers": [{"name": "c"}],
    }
    assert obj["status"] == {"phase": "Pending"}
    assert "resourceClaims" not in pod("q")["spec"]
