"""DeviceTaintRules: taints the kube-scheduler adds to devices without touching their slices.

The scheduler's slice tracker (``DRADeviceTaintRules``) appends the taint of every rule whose
``spec.deviceSelector`` matches a device (each of driver, pool and device that is set must be
equal; an empty selector matches every device) to that device's own taints. Allocation then
treats them like slice taints.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

RawObject = Mapping[str, Any]


def _matches(selector: Mapping[str, Any], *, driver: str, pool: str, device: str) -> bool:
    wanted = {"driver": driver, "pool": pool, "device": device}
    return all(not selector.get(key) or selector.get(key) == value for key, value in wanted.items())


def apply_taint_rules(slice_obj: RawObject, rules: Sequence[RawObject]) -> RawObject:
    """The slice with each rule's taint appended to the devices the rule selects.

    Returns the slice itself when no rule selects any of its devices.
    """
    spec = slice_obj.get("spec") or {}
    driver = str(spec.get("driver") or "")
    pool = str((spec.get("pool") or {}).get("name") or "")
    devices = spec.get("devices") or []
    patched: dict[int, list[Any]] = {}
    for index, dev in enumerate(devices):
        name = str(dev.get("name") or "") if isinstance(dev, Mapping) else ""
        for rule in rules:
            rule_spec = rule.get("spec") or {}
            selector = rule_spec.get("deviceSelector") or {}
            taint = rule_spec.get("taint")
            if not isinstance(taint, Mapping) or not isinstance(selector, Mapping):
                continue
            if _matches(selector, driver=driver, pool=pool, device=name):
                patched.setdefault(index, []).append(dict(taint))
    if not patched:
        return slice_obj
    out = copy.deepcopy(dict(slice_obj))
    for index, taints in patched.items():
        dev = out["spec"]["devices"][index]
        dev["taints"] = [*(dev.get("taints") or []), *taints]
    return out
