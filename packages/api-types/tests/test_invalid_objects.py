# ruff: noqa: E501  (one case per line reads better as a table)
"""A table of invalid objects, each rejected with the expected field path.

Every case starts from a valid object, breaks one rule and expects exactly one error, at the
path the kube-apiserver would report (map keys quoted, list indexes in brackets).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from dra_api_types import (
    ApiObject,
    UnknownKindError,
    ValidationError,
    load_all,
    parse_object,
    validate,
    validation_errors,
)

Doc = dict[str, Any]


def _device(i: int) -> Doc:
    return {
        "name": f"gpu-{i}",
        "attributes": {
            "type": {"string": "gpu"},
            "productName": {"string": "NVIDIA GB200"},
            "cudaComputeCapability": {"version": "10.0.0"},
            "index": {"int": i},
            "gpu.nvidia.com/uuid": {"string": f"GPU-0000000{i}-cb8e-7683-e47d-9c99e6f49eb5"},
        },
        "capacity": {"memory": {"value": "189471Mi"}},
    }


def valid_slice() -> Doc:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.nvidia.com-abcde"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-1",
            "devices": [_device(i) for i in range(4)],
        },
    }


def valid_claim() -> Doc:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "claim", "namespace": "default"},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "selectors": [{"cel": {"expression": "device.driver != ''"}}],
                            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                        },
                    },
                    {
                        "name": "any",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "gpu.nvidia.com"},
                            {"name": "mig", "deviceClassName": "mig.nvidia.com", "count": 2},
                        ],
                    },
                ],
                "constraints": [
                    {"requests": ["gpu", "any/big"], "matchAttribute": "gpu.nvidia.com/uuid"}
                ],
                "config": [
                    {
                        "requests": ["gpu"],
                        "opaque": {
                            "driver": "gpu.nvidia.com",
                            "parameters": {
                                "apiVersion": "resource.nvidia.com/v1beta1",
                                "kind": "GpuConfig",
                                "sharing": {
                                    "strategy": "MPS",
                                    "mpsConfig": {"defaultActiveThreadPercentage": 50},
                                },
                            },
                        },
                    }
                ],
            }
        },
    }


def valid_class() -> Doc:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}],
            "extendedResourceName": "nvidia.com/gpu",
        },
    }


def valid_template() -> Doc:
    claim = valid_claim()
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "tpl", "namespace": "default"},
        "spec": {"metadata": {"labels": {"app": "x"}}, "spec": claim["spec"]},
    }


def valid_compute_domain() -> Doc:
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "cd", "namespace": "default"},
        "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "cd-channel"}}},
    }


BASES: dict[str, Callable[[], Doc]] = {
    "slice": valid_slice,
    "claim": valid_claim,
    "class": valid_class,
    "template": valid_template,
    "cd": valid_compute_domain,
}


def _set(path: str, value: Any) -> Callable[[Doc], object]:
    """A mutation that sets a dotted path (``a.b[0].c``) to ``value``."""

    def mutate(doc: Doc) -> None:
        parts = path.replace("[", ".[").split(".")
        node: Any = doc
        for part in parts[:-1]:
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        last = parts[-1]
        if last.startswith("["):
            node[int(last[1:-1])] = value
        elif value is _DELETE:
            del node[last]
        else:
            node[last] = value

    return mutate


_DELETE = object()
R = "spec.devices.requests"
EX = "spec.devices.requests[0].exactly"
PARAMS = "spec.devices.config[0].opaque.parameters"


def _many_devices(n: int, *, taint: bool = False) -> list[Doc]:
    devices: list[Doc] = [{"name": f"d{i}"} for i in range(n)]
    if taint:
        devices[0]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    return devices


def _attrs(n: int) -> dict[str, Doc]:
    return {f"a{i}": {"int": i} for i in range(n)}


CASES: list[tuple[str, str, Callable[[Doc], object], str]] = [
    # ---- ResourceSlice
    ("129 devices", "slice", _set("spec.devices", _many_devices(129)), "spec.devices"),
    ("65 devices when one is tainted", "slice", _set("spec.devices", _many_devices(65, taint=True)), "spec.devices"),
    ("33 attributes+capacities", "slice", _set("spec.devices[0].attributes", _attrs(32)), "spec.devices[0]"),
    ("two attribute values", "slice", _set('spec.devices[3].attributes', {"gpu.nvidia.com/uuid": {"string": "x", "int": 1}}), 'spec.devices[3].attributes["gpu.nvidia.com/uuid"]'),
    ("no attribute value", "slice", _set("spec.devices[3].attributes", {"gpu.nvidia.com/uuid": {}}), 'spec.devices[3].attributes["gpu.nvidia.com/uuid"]'),
    ("attribute id not a C identifier", "slice", _set("spec.devices[0].attributes", {"gpu.nvidia.com/bad-name": {"int": 1}}), 'spec.devices[0].attributes["gpu.nvidia.com/bad-name"]'),
    ("attribute domain not a DNS subdomain", "slice", _set("spec.devices[0].attributes", {"gpu_x.com/x": {"int": 1}}), 'spec.devices[0].attributes["gpu_x.com/x"]'),
    ("attribute int beyond int64", "slice", _set("spec.devices[0].attributes.index", {"int": 1 << 63}), 'spec.devices[0].attributes["index"].int'),
    ("attribute string > 64", "slice", _set("spec.devices[0].attributes.productName", {"string": "x" * 65}), 'spec.devices[0].attributes["productName"].string'),
    ("attribute version not semver", "slice", _set("spec.devices[0].attributes.cudaComputeCapability", {"version": "10.0"}), 'spec.devices[0].attributes["cudaComputeCapability"].version'),
    ("device name not a DNS label", "slice", _set("spec.devices[0].name", "GPU_0"), "spec.devices[0].name"),
    ("duplicate device name", "slice", _set("spec.devices[1].name", "gpu-0"), "spec.devices[1].name"),
    ("driver not a DNS subdomain", "slice", _set("spec.driver", "gpu_nvidia.com"), "spec.driver"),
    ("driver longer than 63", "slice", _set("spec.driver", "a" * 60 + ".com"), "spec.driver"),
    ("resourceSliceCount 0", "slice", _set("spec.pool.resourceSliceCount", 0), "spec.pool.resourceSliceCount"),
    ("negative pool generation", "slice", _set("spec.pool.generation", -1), "spec.pool.generation"),
    ("pool name part not a subdomain", "slice", _set("spec.pool.name", "node-1/Bad"), "spec.pool.name"),
    ("nodeName and allNodes", "slice", _set("spec.allNodes", True), "spec"),
    ("no node selection", "slice", _set("spec.nodeName", _DELETE), "spec"),
    ("nodeSelector with two terms", "slice", lambda d: (d["spec"].pop("nodeName"), d["spec"].update(nodeSelector={"nodeSelectorTerms": [{}, {}]})), "spec.nodeSelector.nodeSelectorTerms"),
    ("nodeSelector operator unknown", "slice", lambda d: (d["spec"].pop("nodeName"), d["spec"].update(nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Is"}]}]})), "spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[0].operator"),
    ("9 counter sets", "slice", lambda d: (d["spec"].pop("devices"), d["spec"].update(sharedCounters=[{"name": f"s{i}", "counters": {"m": {"value": "1"}}} for i in range(9)])), "spec.sharedCounters"),
    ("33 counters in a set", "slice", lambda d: (d["spec"].pop("devices"), d["spec"].update(sharedCounters=[{"name": "s", "counters": {f"c{i}": {"value": "1"}for i in range(33)}}])), "spec.sharedCounters[0].counters"),
    ("devices and sharedCounters", "slice", _set("spec.sharedCounters", [{"name": "s", "counters": {"m": {"value": "1"}}}]), "spec"),
    ("taint effect unknown", "slice", _set("spec.devices[0].taints", [{"key": "k", "effect": "Evict"}]), "spec.devices[0].taints[0].effect"),
    ("17 taints", "slice", _set("spec.devices[0].taints", [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(17)]), "spec.devices[0].taints"),
    ("3 counter consumptions", "slice", _set("spec.devices[0].consumesCounters", [{"counterSet": f"s{i}", "counters": {"m": {"value": "1"}}} for i in range(3)]), "spec.devices[0].consumesCounters"),
    ("requestPolicy without allowMultipleAllocations", "slice", _set("spec.devices[0].capacity.memory.requestPolicy", {"default": "1Gi", "validValues": ["1Gi"]}), 'spec.devices[0].capacity["memory"].requestPolicy'),
    ("requestPolicy default outside validValues", "slice", lambda d: d["spec"]["devices"][0].update(allowMultipleAllocations=True, capacity={"memory": {"value": "8Gi", "requestPolicy": {"default": "2Gi", "validValues": ["1Gi", "4Gi"]}}}), 'spec.devices[0].capacity["memory"].requestPolicy.validValues'),
    ("5 binding conditions", "slice", lambda d: d["spec"]["devices"][0].update(bindingConditions=[f"c{i}" for i in range(5)], bindingFailureConditions=["f"]), "spec.devices[0].bindingConditions"),
    ("device nodeName without perDeviceNodeSelection", "slice", _set("spec.devices[0].nodeName", "node-1"), "spec.devices[0]"),
    ("allNodes false", "slice", _set("spec.allNodes", False), "spec.allNodes"),
    ("empty devices and sharedCounters", "slice", _set("spec.sharedCounters", []), "spec"),
    ("binding failure conditions without conditions", "slice", _set("spec.devices[0].bindingFailureConditions", ["f"]), "spec.devices[0].bindingConditions"),
    ("binding conditions overlap", "slice", lambda d: d["spec"]["devices"][0].update(bindingConditions=["a"], bindingFailureConditions=["a"]), "spec.devices[0].bindingFailureConditions[0]"),
    ("requestPolicy step does not divide default", "slice", lambda d: d["spec"]["devices"][0].update(allowMultipleAllocations=True, capacity={"memory": {"value": "8Gi", "requestPolicy": {"default": "2Gi", "validRange": {"min": "1Gi", "step": "2Gi"}}}}), 'spec.devices[0].capacity["memory"].requestPolicy.validRange.step'),
    ("requestPolicy both validValues and validRange", "slice", lambda d: d["spec"]["devices"][0].update(allowMultipleAllocations=True, capacity={"memory": {"value": "8Gi", "requestPolicy": {"default": "1Gi", "validValues": ["1Gi"], "validRange": {"min": "1Gi"}}}}), 'spec.devices[0].capacity["memory"].requestPolicy'),
    ("slice name not a subdomain", "slice", _set("metadata.name", "Node_1"), "metadata.name"),
    ("label value too long", "slice", _set("metadata.labels", {"a": "x" * 64}), 'metadata.labels["a"]'),
    ("owner reference without uid", "slice", _set("metadata.ownerReferences", [{"apiVersion": "v1", "kind": "Node", "name": "n"}]), "metadata.ownerReferences[0].uid"),
    # ---- ResourceClaim
    ("33 requests", "claim", lambda d: d["spec"]["devices"].update(requests=[{"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(33)], constraints=[], config=[]), R),
    ("exactly and firstAvailable", "claim", _set("spec.devices.requests[0].firstAvailable", [{"name": "a", "deviceClassName": "c"}]), "spec.devices.requests[0]"),
    ("neither exactly nor firstAvailable", "claim", _set("spec.devices.requests[0].exactly", _DELETE), "spec.devices.requests[0]"),
    ("request name not a DNS label", "claim", lambda d: (d["spec"]["devices"]["requests"][1].update(name="Any"), d["spec"]["devices"].pop("constraints")), "spec.devices.requests[1].name"),
    ("duplicate request name", "claim", lambda d: (d["spec"]["devices"]["requests"][1].update(name="gpu"), d["spec"]["devices"].pop("constraints")), "spec.devices.requests[1].name"),
    ("deviceClassName missing", "claim", _set(EX + ".deviceClassName", _DELETE), EX + ".deviceClassName"),
    ("deviceClassName invalid", "claim", _set(EX + ".deviceClassName", "GPU"), EX + ".deviceClassName"),
    ("allocationMode unknown", "claim", _set(EX + ".allocationMode", "Some"), EX + ".allocationMode"),
    ("count 0", "claim", _set(EX + ".count", 0), EX + ".count"),
    ("count with All", "claim", lambda d: d["spec"]["devices"]["requests"][0]["exactly"].update(allocationMode="All", count=2), EX + ".count"),
    ("9 subrequests", "claim", _set("spec.devices.requests[1].firstAvailable", [{"name": n, "deviceClassName": "c"} for n in ["big", *(f"s{i}" for i in range(8))]]), "spec.devices.requests[1].firstAvailable"),
    ("subrequest without class", "claim", _set("spec.devices.requests[1].firstAvailable[1].deviceClassName", _DELETE), "spec.devices.requests[1].firstAvailable[1].deviceClassName"),
    ("33 selectors", "claim", _set(EX + ".selectors", [{"cel": {"expression": "true"}}] * 33), EX + ".selectors"),
    ("CEL expression > 10Ki", "claim", _set(EX + ".selectors[0].cel.expression", "true && " * 1500 + "true"), EX + ".selectors[0].cel.expression"),
    ("selector without cel", "claim", _set(EX + ".selectors[0]", {}), EX + ".selectors[0].cel"),
    ("17 tolerations", "claim", _set(EX + ".tolerations", [{"operator": "Exists"}] * 17), EX + ".tolerations"),
    ("Exists toleration with value", "claim", _set(EX + ".tolerations[0].value", "v"), EX + ".tolerations[0].value"),
    ("toleration operator unknown", "claim", _set(EX + ".tolerations[0].operator", "In"), EX + ".tolerations[0].operator"),
    ("toleration value not a label value", "claim", _set(EX + ".tolerations[0]", {"key": "k", "value": "a b"}), EX + ".tolerations[0].value"),
    ("toleration effect unknown", "claim", _set(EX + ".tolerations[0].effect", "Evict"), EX + ".tolerations[0].effect"),
    ("capacity request name invalid", "claim", _set(EX + ".capacity", {"requests": {"bad-name": "1Gi"}}), EX + '.capacity.requests["bad-name"]'),
    ("constraint names unknown request", "claim", _set("spec.devices.constraints[0].requests", ["nope"]), "spec.devices.constraints[0].requests[0]"),
    ("constraint names unknown subrequest", "claim", _set("spec.devices.constraints[0].requests", ["any/huge"]), "spec.devices.constraints[0].requests[0]"),
    ("constraint without attribute", "claim", _set("spec.devices.constraints[0].matchAttribute", _DELETE), "spec.devices.constraints[0].matchAttribute"),
    ("matchAttribute not fully qualified", "claim", _set("spec.devices.constraints[0].matchAttribute", "uuid"), "spec.devices.constraints[0].matchAttribute"),
    ("33 constraints", "claim", _set("spec.devices.constraints", [{"matchAttribute": "a.b/c"}] * 33), "spec.devices.constraints"),
    ("config names unknown request", "claim", _set("spec.devices.config[0].requests", ["nope"]), "spec.devices.config[0].requests[0]"),
    ("config without opaque", "claim", _set("spec.devices.config[0].opaque", _DELETE), "spec.devices.config[0].opaque"),
    ("33 configs", "claim", _set("spec.devices.config", [{"opaque": {"driver": "x.com", "parameters": {}}}] * 33), "spec.devices.config"),
    ("opaque driver invalid", "claim", _set("spec.devices.config[0].opaque.driver", "gpu_x"), "spec.devices.config[0].opaque.driver"),
    ("opaque parameters > 10Ki", "claim", _set("spec.devices.config[0].opaque", {"driver": "x.com", "parameters": {"blob": "x" * 10240}}), "spec.devices.config[0].opaque.parameters"),
    ("GpuConfig unknown field", "claim", _set(PARAMS + ".sharingg", {}), PARAMS + ".sharingg"),
    ("GpuConfig unknown strategy", "claim", _set(PARAMS + ".sharing.strategy", "Exclusive"), PARAMS + ".sharing.strategy"),
    ("MPS thread percentage 101", "claim", _set(PARAMS + ".sharing.mpsConfig.defaultActiveThreadPercentage", 101), PARAMS + ".sharing.mpsConfig.defaultActiveThreadPercentage"),
    ("MPS per-device key not UUID/index", "claim", _set(PARAMS + ".sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit", {"first": "1Gi"}), PARAMS + '.sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit["first"]'),
    ("MPS pinned limit not a quantity", "claim", _set(PARAMS + ".sharing.mpsConfig.defaultPinnedDeviceMemoryLimit", "10GB"), PARAMS + ".sharing.mpsConfig.defaultPinnedDeviceMemoryLimit"),
    ("time-slicing interval unknown", "claim", _set(PARAMS + ".sharing", {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "VeryLong"}}), PARAMS + ".sharing.timeSlicingConfig.interval"),
    ("mpsConfig with TimeSlicing", "claim", _set(PARAMS + ".sharing.strategy", "TimeSlicing"), PARAMS + ".sharing.mpsConfig"),
    ("unknown NVIDIA kind", "claim", _set(PARAMS + ".kind", "GpuConfigg"), PARAMS + ".kind"),
    ("claim name invalid", "claim", _set("metadata.name", "My_Claim"), "metadata.name"),
    ("namespace invalid", "claim", _set("metadata.namespace", "a.b"), "metadata.namespace"),
    ("257 reservations", "claim", _set("status", {"allocation": {"devices": {"results": []}}, "reservedFor": [{"resource": "pods", "name": "p", "uid": str(i)} for i in range(257)]}), "status.reservedFor"),
    ("reservedFor without allocation", "claim", _set("status", {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u"}]}), "status.reservedFor"),
    ("allocated device name invalid", "claim", _set("status", {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "GPU 0"}]}}}), "status.allocation.devices.results[0].device"),
    ("allocation result for unknown request", "claim", _set("status", {"allocation": {"devices": {"results": [{"request": "tpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}]}}}), "status.allocation.devices.results[0].request"),
    ("device status ip not CIDR", "claim", _set("status", {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "p", "device": "gpu-0"}]}}, "devices": [{"driver": "gpu.nvidia.com", "pool": "p", "device": "gpu-0", "networkData": {"ips": ["10.0.0.300/24"]}}]}), "status.devices[0].networkData.ips[0]"),
    ("device status for an unallocated device", "claim", _set("status", {"devices": [{"driver": "gpu.nvidia.com", "pool": "p", "device": "gpu-0"}]}), "status.devices[0]"),
    ("shareID not a UUID", "claim", _set("status", {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "p", "device": "gpu-0", "shareID": "ABC"}]}}}), "status.allocation.devices.results[0].shareID"),
    ("allocation config without source", "claim", _set("status", {"allocation": {"devices": {"config": [{"opaque": {"driver": "x.com", "parameters": {}}}]}}}), "status.allocation.devices.config[0].source"),
    # ---- DeviceClass
    ("33 class selectors", "class", _set("spec.selectors", [{"cel": {"expression": "true"}}] * 33), "spec.selectors"),
    ("extendedResourceName without domain", "class", _set("spec.extendedResourceName", "gpu"), "spec.extendedResourceName"),
    ("extendedResourceName in kubernetes.io", "class", _set("spec.extendedResourceName", "kubernetes.io/gpu"), "spec.extendedResourceName"),
    ("class without name", "class", _set("metadata.name", _DELETE), "metadata.name"),
    ("class in a namespace", "class", _set("metadata.namespace", "default"), "metadata.namespace"),
    ("class config without driver", "class", _set("spec.config", [{"opaque": {"driver": "", "parameters": {}}}]), "spec.config[0].opaque.driver"),
    ("class config without parameters", "class", _set("spec.config", [{"opaque": {"driver": "gpu.nvidia.com"}}]), "spec.config[0].opaque.parameters"),
    # ---- ResourceClaimTemplate
    ("template spec.metadata.name", "template", _set("spec.metadata.name", "x"), "spec.metadata.name"),
    ("template request name", "template", lambda d: (d["spec"]["spec"]["devices"]["requests"][0].update(name="G"), d["spec"]["spec"]["devices"].update(constraints=[], config=[])), "spec.spec.devices.requests[0].name"),
    # ---- ComputeDomain
    ("channel allocationMode unknown", "cd", _set("spec.channel.allocationMode", "Many"), "spec.channel.allocationMode"),
    ("numNodes negative", "cd", _set("spec.numNodes", -1), "spec.numNodes"),
    ("channel missing", "cd", _set("spec.channel", _DELETE), "spec.channel"),
    ("channel template name missing", "cd", _set("spec.channel.resourceClaimTemplate", {}), "spec.channel.resourceClaimTemplate.name"),
    ("unknown ComputeDomain spec field", "cd", _set("spec.numnodes", 1), "spec.numnodes"),
    ("unknown ComputeDomain channel field", "cd", _set("spec.channel.allocationmode", "All"), "spec.channel.allocationmode"),
    ("status node ip invalid", "cd", _set("status", {"status": "Ready", "nodes": [{"name": "n", "ipAddress": "300.1.1.1", "cliqueID": "c"}]}), "status.nodes[0].ipAddress"),
]  # fmt: skip


# Structural errors raised while parsing (wrong JSON type, bad quantity, unknown strict field).
PARSE_CASES: list[tuple[str, str, Callable[[Doc], object], str]] = [
    ("int attribute given a string", "slice", _set("spec.devices[0].attributes.index", {"int": "x"}), 'spec.devices[0].attributes["index"].int'),
    ("capacity not a quantity", "slice", _set("spec.devices[0].capacity.memory.value", "1K"), 'spec.devices[0].capacity["memory"].value'),
    ("bool attribute given an int", "slice", _set("spec.devices[0].attributes.index", {"bool": 1}), 'spec.devices[0].attributes["index"].bool'),
    ("devices not a list", "slice", _set("spec.devices", {"a": 1}), "spec.devices"),
    ("count not an int", "claim", _set(EX + ".count", "1"), EX + ".count"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "base", "mutate", "path"), CASES, ids=[c[0] for c in CASES])
def test_invalid_object_is_rejected_at_path(
    name: str, base: str, mutate: Callable[[Doc], object], path: str
) -> None:
    doc = BASES[base]()
    mutate(doc)
    obj = parse_object(doc)
    assert isinstance(obj, ApiObject)
    errors = validation_errors(obj)
    assert [e.path for e in errors] == [path], [str(e) for e in errors]
    error = errors[0]
    assert error.object_ref.kind == doc["kind"]
    assert error.object_ref.name == doc["metadata"].get("name", "")
    with pytest.raises(ValidationError) as raised:
        validate(obj)
    assert raised.value.path == path
    assert path in str(raised.value)


@pytest.mark.parametrize(
    ("name", "base", "mutate", "path"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES]
)
def test_structurally_invalid_object_fails_to_parse(
    name: str, base: str, mutate: Callable[[Doc], object], path: str
) -> None:
    doc = BASES[base]()
    mutate(doc)
    with pytest.raises(ValidationError) as raised:
        parse_object(doc)
    assert raised.value.path == path
    assert raised.value.object_ref.kind == doc["kind"]


@pytest.mark.parametrize("base", sorted(BASES))
def test_bases_are_valid(base: str) -> None:
    obj = parse_object(BASES[base](), validate=True)
    assert isinstance(obj, ApiObject)


def test_load_all_raises_on_the_first_invalid_object() -> None:
    bad = copy.deepcopy(valid_claim())
    bad["metadata"]["name"] = "Bad_Name"
    from dra_api_types import dump_all

    text = dump_all([parse_object(valid_class()), parse_object(bad)])
    with pytest.raises(ValidationError) as raised:
        load_all(text)
    assert raised.value.path == "metadata.name"
    assert raised.value.object_ref.kind == "ResourceClaim"
    assert raised.value.object_ref.namespace == "default"
    assert "ResourceClaim 'default/Bad_Name'" in str(raised.value)
    assert len(load_all(text, validate=False)) == 2


def test_unknown_kind_in_an_owned_group() -> None:
    with pytest.raises(UnknownKindError) as raised:
        parse_object({"apiVersion": "resource.k8s.io/v1", "kind": "ResourcePoolStatusRequest"})
    assert raised.value.path == "kind"


def test_list_kinds_prefix_item_paths() -> None:
    bad = valid_slice()
    bad["spec"]["driver"] = "bad_driver"
    lst = parse_object(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSliceList",
            "items": [valid_slice(), bad],
        }
    )
    assert isinstance(lst, ApiObject)
    (error,) = validation_errors(lst)
    assert error.path == "items[1].spec.driver"
    assert error.object_ref.kind == "ResourceSlice"


def test_nested_types_validate_on_their_own() -> None:
    from dra_api_types import Device, DeviceRequest, ResourceSliceSpec

    device = Device.from_dict({"name": "gpu-0", "attributes": {"gpu.nvidia.com/uuid": {}}})
    assert [e.path for e in validation_errors(device)] == ['attributes["gpu.nvidia.com/uuid"]']
    with pytest.raises(ValidationError) as raised:
        DeviceRequest.from_dict(
            {"name": "gpu", "exactly": {"deviceClassName": "c", "count": 0}}, validate=True
        )
    assert raised.value.path == "exactly.count"
    assert raised.value.object_ref.kind == "DeviceRequest"
    spec = ResourceSliceSpec.from_dict(valid_slice()["spec"])
    assert validation_errors(spec) == []


def test_kind_and_api_version_must_match_the_model() -> None:
    from dra_api_types import DeviceClass

    with pytest.raises(ValidationError) as raised:
        DeviceClass.from_dict({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"})
    assert raised.value.path == "kind"
    with pytest.raises(ValidationError) as raised:
        DeviceClass.from_dict({"apiVersion": "resource.k8s.io/v1beta1", "kind": "DeviceClass"})
    assert raised.value.path == "apiVersion"
