"""Reading the common shape of a ResourceSlice straight from its JSON, without the models.

A cluster's slices are most of what ``kubectl dra explain`` and the allocation controller
read (1,334 slices of 14,000 devices at 1,000 nodes), and building api-types' models of
them (one per attribute and capacity: ~350,000 at that size) took most of explain's time
(docs/scale.md). Drivers publish devices of a plain shape: a name, attributes and
capacities. :func:`read_plain_slice` reads such a slice into the same
:class:`~dra_allocator.model.SliceInfo` that :func:`~dra_allocator.model.parse_slice`
makes of its model, checking every value it reads as strictly as the model would. It reads
nothing else: a slice with any other field the model knows (taints, counters, node
selectors, request policies, binding conditions, ...), a ``null``, or a value of another
type is left to the model path (it answers None), so that path's results and its errors
naming the field stay the only ones there are.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from dra_api_types import ObjectMeta, Quantity, QuantityError, ValidationError

from .model import AttrValue, CapacityInfo, DeviceInfo, SliceInfo

# What this reader understands, at each level; any other key sends the slice to the models.
_TOP_KEYS = frozenset({"apiVersion", "kind", "metadata", "spec"})
_SPEC_KEYS = frozenset({"driver", "pool", "nodeName", "devices"})
_POOL_KEYS = frozenset({"name", "generation", "resourceSliceCount"})
_DEVICE_KEYS = frozenset({"name", "attributes", "capacity"})
# The scalar members of an attribute value and the exact type each must have.
_SCALARS: dict[str, type] = {"int": int, "bool": bool, "string": str, "version": str}


def read_plain_slice(data: Mapping[str, Any]) -> SliceInfo | None:
    """The slice's record, or None when it is not of the plain shape (the model path then
    reads it, and raises what cannot be read).

    ``data`` is a ``resource.k8s.io/v1`` ResourceSlice (after any DeviceTaintRules).
    """
    if not _TOP_KEYS.issuperset(data):
        return None
    spec, meta = data.get("spec"), data.get("metadata", {})
    if not isinstance(spec, dict) or not isinstance(meta, dict) or not _SPEC_KEYS.issuperset(spec):
        return None
    pool = spec.get("pool")
    if not isinstance(pool, dict) or not _POOL_KEYS.issuperset(pool):
        return None
    driver, node_name = spec.get("driver", ""), spec.get("nodeName", "")
    pool_name = pool.get("name", "")
    generation, count = pool.get("generation", 0), pool.get("resourceSliceCount", 0)
    if not (_is_str(driver) and _is_str(node_name) and _is_str(pool_name)):
        return None
    if not (_is_int(generation) and _is_int(count)):
        return None
    devices = spec.get("devices", [])
    if not isinstance(devices, list):
        return None
    try:
        name = ObjectMeta.from_dict(meta).name or ""
    except ValidationError:
        return None
    info = SliceInfo(
        name=name,
        driver=driver,
        pool=pool_name,
        generation=generation,
        slice_count=count,
        node_name=node_name,
        all_nodes=False,
        node_selector=None,
        per_device_node_selection=False,
        shared_counters=(),
        devices=[],
    )
    for dev in devices:
        device = _plain_device(dev, info)
        if device is None:
            return None
        info.devices.append(device)
    return info


def _is_str(value: object) -> bool:
    return type(value) is str


def _is_int(value: object) -> bool:
    return type(value) is int


def _plain_device(dev: object, slc: SliceInfo) -> DeviceInfo | None:
    """A device of only a name, attributes and capacities (None for anything else)."""
    if not isinstance(dev, dict) or not _DEVICE_KEYS.issuperset(dev):
        return None
    name, attrs, caps = dev.get("name", ""), dev.get("attributes", {}), dev.get("capacity", {})
    if not _is_str(name) or not isinstance(attrs, dict) or not isinstance(caps, dict):
        return None
    attributes: dict[str, AttrValue] = {}
    qualified_given: dict[str, AttrValue] = {}
    for key, value in attrs.items():
        # Inline (~170,000 values at 1,000 nodes): exactly one scalar member, of its exact
        # type (strict, as the model: a bool is not an int).
        if type(value) is not dict or len(value) != 1:
            return None
        ((member, scalar),) = value.items()
        if type(scalar) is not _SCALARS.get(member):
            return None
        if "/" in key:
            qualified_given[key] = (member, scalar)
        else:
            attributes[f"{slc.driver}/{key}"] = (member, scalar)
    # As model._parse_device: an explicitly qualified name wins over the unqualified one.
    attributes.update(qualified_given)
    capacity: dict[str, CapacityInfo] = {}
    for key, cap in caps.items():
        if type(cap) is not dict or len(cap) != 1 or type(cap.get("value")) is not str:
            return None
        info = _capacity(cap["value"])
        if info is None:
            return None
        capacity[key] = info
    return DeviceInfo(
        id=(slc.driver, slc.pool, name),
        name=name,
        slice=slc,
        attributes=attributes,
        capacity=capacity,
        consumes_counters=(),
        taints=(),
        binding_conditions=(),
        binding_failure_conditions=(),
        binds_to_node=False,
        allow_multiple=False,
        node_name="",
        all_nodes=False,
        node_selector=None,
    )


@functools.lru_cache(maxsize=4096)
def _capacity(text: str) -> CapacityInfo | None:
    """A capacity of only a ``value``, without a request policy, as model._parse_capacity
    reads one (None if ``text`` is not a quantity). Remembered: the record is immutable and a
    cluster repeats a handful of capacity strings on thousands of devices."""
    try:
        quantity = Quantity.coerce(text)
    except QuantityError:
        return None
    return CapacityInfo(
        quantity=quantity,
        value=quantity.amount(),
        default=None,
        default_raw=None,
        valid_values=(),
        range_min=None,
        range_min_raw=None,
        range_max=None,
        range_step=None,
        range_step_raw=None,
        has_policy=False,
        has_range=False,
    )
