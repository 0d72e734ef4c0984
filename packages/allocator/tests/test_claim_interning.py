"""Claims read through one interner share their equal parts, and read as without it."""

from __future__ import annotations

import copy
import gc
from pathlib import Path
from typing import Any

import pytest
import yaml
from allocation_builders import case_objects
from dra_allocator import model
from dra_allocator.claim_interning import ClaimInterner
from dra_allocator.errors import AllocationError
from dra_allocator.inputs import Document
from dra_allocator.model import ClaimInfo
from dra_allocator.snapshot import build_snapshot, read_object
from dra_api_types import ResourceClaim
from dra_api_types import testing as builders
from dra_api_types.nvidia_v1beta1 import GPU_DRIVER

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent / "conformance" / "cases.yaml").read_text(encoding="utf-8")
)
_TIME_SLICING = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing"},
}


def _allocated(name: str, node: str, device: str, *, count: int = 1) -> dict[str, Any]:
    """A claim as the resourceclaim controller makes it from one template, allocated."""
    return builders.resource_claim(
        name,
        namespace="ns",
        uid=f"uid-{name}",
        requests=[builders.exactly("gpu", device_class="gpu.nvidia.com", count=count)],
        config=[builders.opaque_config(GPU_DRIVER, _TIME_SLICING, requests=["gpu"])],
        allocation=builders.allocation(
            [builders.device_result(device, pool=node)],
            config=[
                builders.opaque_config(
                    GPU_DRIVER, _TIME_SLICING, requests=["gpu"], source="FromClaim"
                )
            ],
            node=node,
        ),
    )


def _read(data: dict[str, Any], interner: ClaimInterner | None) -> ClaimInfo:
    info = read_object(data, where="test", interner=interner)
    assert isinstance(info, ClaimInfo)
    return info


def _record(info: ClaimInfo) -> tuple[object, ...]:
    allocation = info.allocation.to_dict() if info.allocation else None
    return (info.key, info.uid, info.requests, info.constraints, info.config, allocation)


def test_claims_read_through_an_interner_read_as_without_it() -> None:
    claims = [o for case in CASES for o in case_objects(case) if o["kind"] == "ResourceClaim"]
    claims += [_allocated(f"c{i}", f"node-{i % 2}", f"gpu-{i}") for i in range(4)]
    assert len(claims) > 20
    interner = ClaimInterner()
    for data in claims:
        alone, shared = _read(copy.deepcopy(data), None), _read(copy.deepcopy(data), interner)
        assert shared.obj.to_dict() == alone.obj.to_dict() == data
        assert _record(shared) == _record(alone)


def test_equal_parts_are_one_object_and_the_rest_is_each_claims_own() -> None:
    interner = ClaimInterner()
    a = _read(_allocated("a", "node-0", "gpu-0"), interner)
    b = _read(_allocated("b", "node-0", "gpu-1"), interner)
    other_node = _read(_allocated("c", "node-1", "gpu-0"), interner)
    other_spec = _read(_allocated("d", "node-0", "gpu-2", count=2), interner)
    assert a.obj.spec is b.obj.spec is other_node.obj.spec
    assert a.requests is b.requests
    assert a.constraints is b.constraints
    assert a.config is b.config
    assert other_spec.obj.spec is not a.obj.spec
    assert other_spec.requests is not a.requests
    assert other_spec.requests[0].exact is not None
    assert other_spec.requests[0].exact.count == 2
    assert a.allocation is not None
    assert b.allocation is not None
    assert a.allocation.node_selector is b.allocation.node_selector
    assert other_node.allocation is not None
    assert other_node.allocation.node_selector is not a.allocation.node_selector
    assert a.allocation.devices is not None
    assert b.allocation.devices is not None
    a_config, b_config = a.allocation.devices.config or [], b.allocation.devices.config or []
    assert len(a_config) == 1
    assert a_config[0] is b_config[0]
    assert a.allocation.devices.results is not b.allocation.devices.results
    assert a.allocation is not b.allocation
    assert a.obj.metadata is not b.obj.metadata


def test_parts_live_only_as_long_as_a_claim_holds_them() -> None:
    interner = ClaimInterner()
    claims = [_read(_allocated(f"c{i}", "node-0", f"gpu-{i}"), interner) for i in range(3)]
    assert len(interner) == 3  # the spec, the node selector, the allocation config
    del claims[0:2]
    gc.collect()
    assert len(interner) == 3, "one claim still holds them"
    claims.clear()
    gc.collect()
    assert len(interner) == 0
    fresh = _read(_allocated("again", "node-0", "gpu-0"), interner)
    assert fresh.requests[0].exact is not None
    assert fresh.requests[0].exact.count == 1


def test_an_offline_snapshot_shares_the_specs_of_claims_made_from_one_template() -> None:
    docs = [
        Document(source="input", index=i, data=_allocated(f"c{i}", f"node-{i}", "gpu-0"))
        for i in range(3)
    ]
    snap = build_snapshot(docs)
    specs = {id(c.obj.spec) for c in snap.claims}
    assert len(snap.claims) == 3
    assert len(specs) == 1


def test_a_spec_read_before_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    parse_spec = model.parse_claim_spec

    def counting(obj: ResourceClaim) -> model.SpecRecords:
        parsed.append(obj.metadata.name or "")
        return parse_spec(obj)

    monkeypatch.setattr(model, "parse_claim_spec", counting)
    interner = ClaimInterner()
    claims = [_read(_allocated(f"c{i}", f"node-{i}", "gpu-0"), interner) for i in range(4)]
    other = _read(_allocated("two", "node-0", "gpu-1", count=2), interner)
    assert parsed == ["c0", "two"]
    for i, info in enumerate(claims):
        assert info.obj.to_dict() == _allocated(f"c{i}", f"node-{i}", "gpu-0")
        assert info.requests is claims[0].requests
    assert other.requests[0].exact is not None
    assert other.requests[0].exact.count == 2


def test_a_claim_with_a_known_spec_still_has_the_rest_checked() -> None:
    interner = ClaimInterner()
    _read(_allocated("good", "node-0", "gpu-0"), interner)
    bad = _allocated("bad", "node-0", "gpu-1")
    bad["status"]["allocation"]["devices"]["results"][0]["pool"] = 7
    with pytest.raises(AllocationError) as err:
        _read(bad, interner)
    assert err.value.object_ref == "test ResourceClaim"
    assert "status.allocation.devices.results[0].pool" in str(err.value)
    bad_spec = _allocated("bad-spec", "node-0", "gpu-1")
    bad_spec["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    with pytest.raises(AllocationError) as err:
        _read(bad_spec, interner)
    assert "spec.devices.requests[0].exactly.count" in str(err.value)
