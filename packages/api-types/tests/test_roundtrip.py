"""Every real manifest loads, validates and dumps back equal; unknown fields survive."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from dra_api_types import (
    ApiObject,
    ComputeDomain,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    dump_all,
    load_all,
    parse_object,
    validation_errors,
)
from dra_api_types.codec import load_documents

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
DEMO_SPECS = sorted((FIXTURES / "nvidia-demo-specs").glob("*.yaml"))
SEED = sorted((FIXTURES / "seed").glob("*.yaml"))
SHARED_SPECS = Path("/work/shared/reference/nvidia-demo-specs")


def test_fixture_sets_are_complete() -> None:
    assert len(DEMO_SPECS) == 22
    assert len(SEED) == 5


@pytest.mark.skipif(not SHARED_SPECS.is_dir(), reason="shared reference copy not present")
def test_demo_spec_copies_match_the_shared_reference() -> None:
    # The reference grows (sharing, IMEX, v1beta1 specs); every copy kept here must be
    # byte-identical to its original.
    for ours in DEMO_SPECS:
        theirs = SHARED_SPECS / ours.name
        assert theirs.is_file(), f"{ours.name} is no longer in the shared reference"
        assert ours.read_bytes() == theirs.read_bytes(), ours.name


@pytest.mark.parametrize("path", DEMO_SPECS + SEED, ids=lambda p: p.name)
def test_manifest_roundtrips(path: Path) -> None:
    raw = load_documents(path)
    server_output = path.name.startswith("resourceslice-")
    objects = load_all(path, validate=not server_output)
    assert len(objects) == len(raw)
    for obj, doc in zip(objects, raw, strict=True):
        plain = obj.to_dict() if isinstance(obj, ApiObject) else obj
        assert plain == doc
    assert load_documents(dump_all(objects)) == raw
    again = load_all(dump_all(objects), validate=not server_output)
    assert again == objects


def test_demo_specs_produce_typed_objects() -> None:
    kinds: dict[str, int] = {}
    for path in DEMO_SPECS:
        for obj in load_all(path):
            kinds[type(obj).__name__] = kinds.get(type(obj).__name__, 0) + 1
    assert kinds["ResourceClaimTemplate"] == 13
    assert kinds["ResourceClaim"] == 5
    assert kinds["DeviceClass"] == 1
    assert kinds["ComputeDomain"] == 2
    # v1 Pods/Namespaces/Deployments, the two resource.k8s.io/v1beta1 templates and the
    # mig-parted config pass through as plain dicts.
    assert kinds["dict"] > 0


def test_seed_objects_are_typed() -> None:
    by_name = {p.name: load_all(p, validate=False) for p in SEED}
    (cls,) = by_name["deviceclass-gpu.nvidia.com.yaml"]
    assert isinstance(cls, DeviceClass)
    assert cls.spec.selectors is not None
    assert cls.spec.selectors[0].cel is not None
    assert "device.attributes['gpu.nvidia.com'].type" in cls.spec.selectors[0].cel.expression
    (slice_,) = by_name["resourceslice-gb200-pod2-f06-node05.yaml"]
    assert isinstance(slice_, ResourceSlice)
    assert slice_.spec.devices is not None
    gpu0 = slice_.spec.devices[0]
    assert gpu0.attributes is not None
    assert gpu0.capacity is not None
    assert gpu0.attributes["cudaComputeCapability"].version == "10.0.0"
    assert str(gpu0.capacity["memory"].value) == "189471Mi"
    (template,) = by_name["resourceclaimtemplate-single-gpu.yaml"]
    assert isinstance(template, ResourceClaimTemplate)
    requests = template.spec.spec.devices.requests
    assert requests is not None
    assert requests[0].exactly is not None
    assert requests[0].exactly.count == 1
    (claim,) = by_name["resourceclaim-gpu-test-pod-gpu-claim-7rqsj.yaml"]
    assert isinstance(claim, ResourceClaim)
    assert claim.status.allocation is not None
    results = claim.status.allocation.devices.results
    assert results is not None
    assert results[0].device == "gpu-0"
    assert validation_errors(claim) == []


def test_seed_resourceslice_is_trimmed_server_output() -> None:
    """The article trimmed the slice; the apiserver's rules flag exactly what is missing."""
    path = FIXTURES / "seed" / "resourceslice-gb200-pod2-f06-node05.yaml"
    (slice_,) = load_all(path, validate=False)
    assert isinstance(slice_, ResourceSlice)
    paths = {e.path for e in validation_errors(slice_)}
    assert paths == {"metadata.ownerReferences[0].uid", "spec.pool.resourceSliceCount"}


def test_compute_domain_demo() -> None:
    (cd, _pod) = load_all(FIXTURES / "nvidia-demo-specs" / "imex_channel-injection-all.yaml")
    assert isinstance(cd, ComputeDomain)
    assert cd.spec.channel is not None
    assert cd.spec.channel.allocation_mode == "All"
    assert cd.spec.channel.resource_claim_template.name == "tpl-imex-channels"


def _with_unknown_fields(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["futureTopLevel"] = {"a": [1, 2, {"b": None}]}
    doc["metadata"]["futureMeta"] = "x"
    doc["spec"]["futureSpec"] = 3
    device = doc["spec"]["devices"][0]
    device["futureDeviceField"] = {"nested": True}
    device["attributes"]["uuid"]["futureAttrField"] = "y"
    device["capacity"]["memory"]["futureCapField"] = ["z"]
    return doc


def test_unknown_fields_of_a_newer_server_survive() -> None:
    (doc,) = load_documents(FIXTURES / "seed" / "resourceslice-gb200-pod2-f06-node05.yaml")
    doc = _with_unknown_fields(doc)
    obj = parse_object(doc)
    assert isinstance(obj, ResourceSlice)
    assert obj.to_dict() == doc
    mutated = obj.copy_deep()
    assert mutated.spec.devices is not None
    mutated.spec.devices[0].name = "gpu-9"
    out = mutated.to_dict()
    assert out["spec"]["devices"][0]["name"] == "gpu-9"
    assert out["spec"]["devices"][0]["futureDeviceField"] == {"nested": True}
    assert out["futureTopLevel"] == doc["futureTopLevel"]


def test_explicit_empty_values_are_kept() -> None:
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "n"},
        "spec": {
            "devices": {
                "requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}],
                "constraints": [{"requests": [], "matchAttribute": "gpu.nvidia.com/parentUUID"}],
            }
        },
    }
    obj = parse_object(doc, validate=True)
    assert isinstance(obj, ResourceClaim)
    assert obj.to_dict() == doc


def test_objects_built_in_code_serialize_to_api_json() -> None:
    from dra_api_types import (
        DeviceClaim,
        DeviceRequest,
        ExactDeviceRequest,
        ObjectMeta,
        ResourceClaimSpec,
    )

    claim = ResourceClaim(
        metadata=ObjectMeta(name="one-gpu", namespace="default"),
        spec=ResourceClaimSpec(
            devices=DeviceClaim(
                requests=[
                    DeviceRequest(
                        name="gpu", exactly=ExactDeviceRequest(device_class_name="gpu.nvidia.com")
                    )
                ]
            )
        ),
    )
    assert claim.to_dict() == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "one-gpu", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
    }
    # Mutating a defaulted nested struct is not lost by "unset fields omitted".
    bare = ResourceClaim()
    bare.status.reserved_for = []
    assert bare.to_dict()["status"] == {"reservedFor": []}


def test_json_list_output_of_kubectl_is_expanded(tmp_path: Path) -> None:
    import json

    (doc,) = load_documents(FIXTURES / "seed" / "deviceclass-gpu.nvidia.com.yaml")
    listing = {"apiVersion": "v1", "kind": "List", "items": [doc, doc]}
    path = tmp_path / "classes.json"
    path.write_text(json.dumps(listing), encoding="utf-8")
    objects = load_all(path)
    assert [type(o).__name__ for o in objects] == ["DeviceClass", "DeviceClass"]
    assert load_all(json.dumps(doc)) == objects[:1]
    assert load_all(str(path)) == objects


def test_kubectl_dry_run_output_loads() -> None:
    """`kubectl create --dry-run=client -o yaml` writes nulls and empty status."""
    text = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  creationTimestamp: null
  name: dry
  namespace: default
spec:
  devices:
    requests:
    - exactly:
        deviceClassName: gpu.nvidia.com
      name: gpu
status: {}
"""
    (claim,) = load_all(text)
    assert isinstance(claim, ResourceClaim)
    assert claim.metadata.creation_timestamp is None
    out = claim.to_dict()
    assert "creationTimestamp" not in out["metadata"]
    assert out["status"] == {}
    unknown = parse_object({**out, "metadata": {"name": "x", "futureField": None}})
    assert isinstance(unknown, ResourceClaim)
    assert unknown.to_dict()["metadata"] == {"name": "x", "futureField": None}
