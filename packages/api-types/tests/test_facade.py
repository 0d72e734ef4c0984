"""The public facade: every name the other packages use imports from dra_api_types."""

from __future__ import annotations

import dra_api_types
from dra_api_types import (
    DeviceClass,
    Quantity,
    ResourceClaim,
    ResourceSlice,
    Version,
    dump_all,
    load_all,
    parse_object,
)


def test_all_names_resolve() -> None:
    for name in dra_api_types.__all__:
        assert getattr(dra_api_types, name) is not None, name


def test_load_dump_roundtrip_of_a_small_manifest() -> None:
    text = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.nvidia.com
spec:
  selectors:
  - cel:
      expression: device.driver == 'gpu.nvidia.com'
---
apiVersion: v1
kind: Namespace
metadata:
  name: demo
"""
    objects = load_all(text)
    assert isinstance(objects[0], DeviceClass)
    assert objects[1] == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}
    assert load_all(dump_all(objects)) == objects


def test_parse_object_dispatches_on_kind() -> None:
    claim = parse_object(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}}
    )
    assert isinstance(claim, ResourceClaim)
    sl = parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"})
    assert isinstance(sl, ResourceSlice)


def test_quantity_and_version_basics() -> None:
    assert str(Quantity.parse("1.5Gi")) == "1536Mi"
    assert Version.parse("1.2.3") < Version.parse("1.10.0")


def test_rest_names_of_the_kinds() -> None:
    from dra_api_types import ComputeDomain, ResourceClaimTemplate

    assert (ResourceClaim.PLURAL, ResourceClaim.NAMESPACED) == ("resourceclaims", True)
    assert (DeviceClass.PLURAL, DeviceClass.NAMESPACED) == ("deviceclasses", False)
    assert ResourceSlice.PLURAL == "resourceslices"
    assert ResourceClaimTemplate.PLURAL == "resourceclaimtemplates"
    assert (ComputeDomain.API_VERSION, ComputeDomain.PLURAL) == (
        "resource.nvidia.com/v1beta1",
        "computedomains",
    )
