"""Parsed claims that are equal in part share that part's objects.

Claims made from one ResourceClaimTemplate have equal specs, and claims allocated with one
opaque config, or on one node, equal allocation configs and node selectors: a 1,000-node
cluster's 5,000 claims have about 40 distinct specs. Parsed (pydantic models and the
allocator's request records), each claim's own copy of those parts is about half of its
~11 KB (``e2e/bench/bench_controller_memory.py``); shared, equal parts are held once.

Parts are matched by their API JSON (after conversion to v1), so two claims share a part
only when the part reads the same. The table holds its parts weakly: a part lives as long
as some claim holds it. Shared parts must not be mutated, as every parsed object of a
snapshot or cache (committing an allocation replaces ``ClaimInfo.allocation``, it does not
change the parts).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from typing import Any, TypeVar

from dra_api_types import ApiModel

from .model import ClaimInfo

_Derived = tuple[list[Any], list[Any], list[Any]]
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
        self._derived: dict[int, _Derived] = {}

    def __len__(self) -> int:
        """How many parts are shared now (live ones only)."""
        return len(self._models)

    def _shared(self, part: str, raw: object, model: _M) -> _M:
        key = (part, _json_key(raw))
        found = self._models.get(key)
        if isinstance(found, type(model)):
            return found
        self._models[key] = model
        return model

    def share(self, info: ClaimInfo, data: Mapping[str, Any]) -> ClaimInfo:
        """``info`` (parsed from the v1 claim ``data``) with the parts an earlier claim
        parsed equal replaced by that claim's objects; ``info`` itself is changed."""
        claim = info.obj
        spec = self._shared("spec", data.get("spec"), claim.spec)
        if spec is claim.spec:
            derived: _Derived = (info.requests, info.constraints, info.config)
            self._derived[id(spec)] = derived
            weakref.finalize(spec, self._derived.pop, id(spec), None)
        else:
            claim.spec = spec
            info.requests, info.constraints, info.config = self._derived[id(spec)]
        allocation = info.allocation
        raw = ((data.get("status") or {}).get("allocation")) or {}
        if allocation is None or not isinstance(raw, Mapping):
            return info
        if allocation.node_selector is not None:
            allocation.node_selector = self._shared(
                "nodeSelector", raw.get("nodeSelector"), allocation.node_selector
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
                self._shared("config", r, m) for r, m in zip(configs, devices.config, strict=True)
            ]
        return info
