"""Parsed claims that are equal in part share that part's objects.

Claims made from one ResourceClaimTemplate have equal specs, and claims allocated with one
opaque config, or on one node, equal allocation configs and node selectors: a 1,000-node
cluster's 5,000 claims have about 40 distinct specs. Parsed (pydantic models and the
allocator's request records), each claim's own copy of those parts is about half of its
~11 KB (``e2e/bench/bench_controller_memory.py``); shared, equal parts are held once.

Parts are matched by their API JSON (after conversion to v1), so two claims share a part
only when the part reads the same. A claim whose spec reads as one read before is parsed
without it (the spec's model and records are the earlier claim's): claims made from one
template differ only in their metadata and status, and validating the spec again was a
fifth to a third of reading such a claim. The table holds its parts weakly: a part lives as
long as some claim holds it. Shared parts must not be mutated, as every parsed object of a
snapshot or cache (committing an allocation replaces ``ClaimInfo.allocation``, it does not
change the parts).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from typing import Any, TypeVar

from dra_api_types import ApiModel, ResourceClaim, ResourceClaimSpec

from .errors import AllocationError
from .model import ClaimInfo, SpecRecords, parse_claim, read_model

_M = TypeVar("_M", bound=ApiModel)


def _json_key(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class ClaimInterner:
    """A table of claim parts, for :func:`~.snapshot.read_object` to share between claims."""

    def __init__(self) -> None:
        self._models: weakref.WeakValueDictionary[tuple[str, str], ApiModel] = (
            weakref.WeakValueDictionary()
        )
        #: The records parsed from a shared spec, by the spec model's ``id`` (dropped with it).
        self._derived: dict[int, SpecRecords] = {}

    def __len__(self) -> int:
        """How many parts are shared now (live ones only)."""
        return len(self._models)

    def _shared(self, part: str, key: str, model: _M) -> _M:
        """The part held under ``key`` (its JSON), or ``model``, held from now on."""
        found = self._models.get((part, key))
        if isinstance(found, type(model)):
            return found
        self._models[(part, key)] = model
        return model

    def read(self, data: Mapping[str, Any], *, where: str) -> ClaimInfo:
        """The v1 claim ``data`` read (as :func:`~.model.read_model` and
        :func:`~.model.parse_claim` would), sharing the parts equal to those of claims read
        before; a spec read before is not parsed again.

        Raises:
            AllocationError: the claim cannot be read (naming ``where`` and the field).
        """
        spec_key = _json_key(data.get("spec"))
        found = self._models.get(("spec", spec_key))
        spec = found if isinstance(found, ResourceClaimSpec) else None
        records = self._derived.get(id(spec)) if spec is not None else None
        to_read = {k: v for k, v in data.items() if k != "spec"} if records is not None else data
        obj = read_model(to_read, where=where)
        if not isinstance(obj, ResourceClaim):
            raise AllocationError("cannot parse: not a ResourceClaim", object_ref=where)
        if spec is not None and records is not None:
            obj.spec = spec
            info = parse_claim(obj, spec_records=records)
        else:
            info = parse_claim(obj)
            self._models[("spec", spec_key)] = obj.spec
            self._derived[id(obj.spec)] = (info.requests, info.constraints, info.config)
            weakref.finalize(obj.spec, self._derived.pop, id(obj.spec), None)
        return self._share_allocation(info, data)

    def _share_allocation(self, info: ClaimInfo, data: Mapping[str, Any]) -> ClaimInfo:
        """``info`` (parsed from ``data``) with the allocation's parts an earlier claim
        parsed equal replaced by that claim's objects; ``info`` itself is changed."""
        allocation = info.allocation
        raw = ((data.get("status") or {}).get("allocation")) or {}
        if allocation is None or not isinstance(raw, Mapping):
            return info
        if allocation.node_selector is not None:
            allocation.node_selector = self._shared(
                "nodeSelector", _json_key(raw.get("nodeSelector")), allocation.node_selector
            )
        devices, raw_devices = allocation.devices, raw.get("devices") or {}
        configs = raw_devices.get("config") if isinstance(raw_devices, Mapping) else None
        if (
            devices is not None
            and devices.config
            and isinstance(configs, list)
            and len(configs) == len(devices.config)
        ):
            devices.config = [
                self._shared("config", _json_key(r), m)
                for r, m in zip(configs, devices.config, strict=True)
            ]
        return info
