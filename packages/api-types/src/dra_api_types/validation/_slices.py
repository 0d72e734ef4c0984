"""The kube-apiserver's rules for ResourceSlice: pools, devices, attributes, counters."""

from __future__ import annotations

from .. import resource_v1 as r
from ..names import (
    device_qualified_name_errors,
    dns_label_errors,
    dns_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)
from ..quantity import Quantity
from ._common import (
    _SEMVER,
    LIMITS,
    TAINT_EFFECTS,
    _Errors,
    _field,
    _index,
    _key,
    _validate_binding_parameters,
    _validate_driver,
    _validate_meta,
    _validate_node_selector,
    _validate_pool_name,
)


def _uses_counters_or_taints(device: r.Device) -> bool:
    list_attrs = any(
        a.ints is not None or a.bools is not None or a.strings is not None or a.versions is not None
        for a in (device.attributes or {}).values()
    )
    return bool(device.taints) or bool(device.consumes_counters) or list_attrs


def _validate_resource_slice(e: _Errors, obj: r.ResourceSlice) -> None:
    _validate_meta(e, obj.metadata, "metadata", namespaced=False)
    spec = obj.spec
    _validate_driver(e, spec.driver, "spec.driver")
    _validate_pool_name(e, spec.pool.name, "spec.pool.name")
    if spec.pool.generation < 0:
        e.add(
            "spec.pool.generation",
            f"Invalid value: {spec.pool.generation}: must be greater than or equal to 0",
        )
    if spec.pool.resource_slice_count <= 0:
        e.add(
            "spec.pool.resourceSliceCount",
            f"Invalid value: {spec.pool.resource_slice_count}: must be greater than zero",
        )
    chosen = [
        name
        for name, is_set in (
            ("nodeName", bool(spec.node_name)),
            ("nodeSelector", spec.node_selector is not None),
            ("allNodes", bool(spec.all_nodes)),
            ("perDeviceNodeSelection", bool(spec.per_device_node_selection)),
        )
        if is_set
    ]
    if len(chosen) != 1:
        e.add(
            "spec",
            "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
            "`perDeviceNodeSelection` is required"
            + (f", but multiple fields are set: {', '.join(chosen)}" if chosen else ""),
        )
    if spec.node_name:
        e.names("spec.nodeName", spec.node_name, dns_subdomain_errors)
    elif spec.node_name == "":
        e.add("spec.nodeName", "Invalid value: must be either unset or set to a non-empty string")
    for name, flag in (
        ("allNodes", spec.all_nodes),
        ("perDeviceNodeSelection", spec.per_device_node_selection),
    ):
        if flag is False:
            e.add(_field("spec", name), "Invalid value: false: must be either unset or set to true")
    if spec.node_selector is not None:
        _validate_node_selector(e, spec.node_selector, "spec.nodeSelector", one_term=True)
    if spec.devices is not None and spec.shared_counters is not None:
        e.add("spec", "Invalid value: only one of `sharedCounters` or `devices` is allowed")
    devices = spec.devices or []
    limit = LIMITS["devices_per_slice"]
    if any(_uses_counters_or_taints(d) for d in devices):
        limit = LIMITS["devices_per_slice_with_taints_or_counters"]
    if not e.too_many("spec.devices", devices, limit):
        names: set[str] = set()
        for i, device in enumerate(devices):
            dp = _index("spec.devices", i)
            _validate_device(e, device, dp, per_device_nodes=bool(spec.per_device_node_selection))
            if device.name in names:
                e.add(_field(dp, "name"), f"Duplicate value: {device.name!r}")
            names.add(device.name)
    counter_sets = spec.shared_counters or []
    if not e.too_many("spec.sharedCounters", counter_sets, LIMITS["counter_sets_per_slice"]):
        set_names: set[str] = set()
        for i, counter_set in enumerate(counter_sets):
            cp = _index("spec.sharedCounters", i)
            if not counter_set.name:
                e.required(_field(cp, "name"))
            else:
                e.names(_field(cp, "name"), counter_set.name, dns_label_errors)
            if counter_set.name in set_names:
                e.add(_field(cp, "name"), f"Duplicate value: {counter_set.name!r}")
            set_names.add(counter_set.name)
            _validate_counters(e, counter_set.counters, _field(cp, "counters"), required=True)


def _validate_counters(
    e: _Errors, counters: dict[str, r.Counter], path: str, *, required: bool
) -> None:
    if required and not counters:
        e.required(path)
    if e.too_many(path, counters, LIMITS["counters_per_counter_set"]):
        return
    for name in counters:
        e.names(_key(path, name), name, dns_label_errors)


def _validate_device(e: _Errors, device: r.Device, path: str, *, per_device_nodes: bool) -> None:
    if not device.name:
        e.required(_field(path, "name"))
    else:
        e.names(_field(path, "name"), device.name, dns_label_errors)
    attributes = device.attributes or {}
    capacity = device.capacity or {}
    combined = len(attributes) + len(capacity)
    if combined > LIMITS["attributes_and_capacities_per_device"]:
        e.add(
            path,
            f"Too many: {combined}: the total number of attributes and capacities must not exceed "
            f"{LIMITS['attributes_and_capacities_per_device']}",
        )
    values = 0
    for name, attribute in attributes.items():
        ap = _key(_field(path, "attributes"), name)
        e.names(ap, name, device_qualified_name_errors)
        values += _validate_attribute(e, attribute, ap)
    if values > LIMITS["attribute_values_per_device"]:
        e.add(
            _field(path, "attributes"),
            f"Too many: {values}: must have at most {LIMITS['attribute_values_per_device']} "
            "attribute values",
        )
    for name, cap in capacity.items():
        cp = _key(_field(path, "capacity"), name)
        e.names(cp, name, device_qualified_name_errors)
        if cap.request_policy is not None:
            if not device.allow_multiple_allocations:
                e.add(
                    _field(cp, "requestPolicy"),
                    "Forbidden: allowMultipleAllocations must be true",
                )
            else:
                _validate_request_policy(
                    e, cap.request_policy, cap.value, _field(cp, "requestPolicy")
                )
    consumptions = device.consumes_counters or []
    cc_path = _field(path, "consumesCounters")
    if not e.too_many(cc_path, consumptions, LIMITS["counter_consumptions_per_device"]):
        seen: set[str] = set()
        for i, consumption in enumerate(consumptions):
            cp = _index(cc_path, i)
            if not consumption.counter_set:
                e.required(_field(cp, "counterSet"))
            else:
                e.names(_field(cp, "counterSet"), consumption.counter_set, dns_label_errors)
            if consumption.counter_set in seen:
                e.add(_field(cp, "counterSet"), f"Duplicate value: {consumption.counter_set!r}")
            seen.add(consumption.counter_set)
            _validate_counters(e, consumption.counters, _field(cp, "counters"), required=True)
    if per_device_nodes:
        node_fields = []
        if device.node_name is not None:
            if device.node_name:
                node_fields.append("nodeName")
                e.names(_field(path, "nodeName"), device.node_name, dns_subdomain_errors)
            else:
                e.add(_field(path, "nodeName"), "Invalid value: must not be empty")
        if device.node_selector is not None:
            node_fields.append("nodeSelector")
            _validate_node_selector(
                e, device.node_selector, _field(path, "nodeSelector"), one_term=False
            )
        if device.all_nodes is not None:
            if device.all_nodes:
                node_fields.append("allNodes")
            else:
                e.add(
                    _field(path, "allNodes"),
                    "Invalid value: false: must be either unset or set to true",
                )
        if len(node_fields) != 1:
            e.add(
                path,
                "Invalid value: exactly one of `nodeName`, `nodeSelector`, or `allNodes` is "
                "required when `perDeviceNodeSelection` is set to true in the ResourceSlice spec",
            )
    elif (
        device.node_name is not None
        or device.node_selector is not None
        or device.all_nodes is not None
    ):
        e.add(
            path,
            "Invalid value: `nodeName`, `nodeSelector` and `allNodes` can only be set if "
            "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
        )
    taints = device.taints or []
    if not e.too_many(_field(path, "taints"), taints, LIMITS["taints_per_device"]):
        for i, taint in enumerate(taints):
            tp = _index(_field(path, "taints"), i)
            if not taint.key:
                e.required(_field(tp, "key"))
            else:
                e.names(_field(tp, "key"), taint.key, qualified_name_errors)
            if taint.value:
                e.names(_field(tp, "value"), taint.value, label_value_errors)
            if not taint.effect:
                e.required(_field(tp, "effect"))
            elif taint.effect not in TAINT_EFFECTS:
                e.not_supported(_field(tp, "effect"), taint.effect, TAINT_EFFECTS)
    _validate_binding_parameters(
        e, device.binding_conditions, device.binding_failure_conditions, path
    )


def _validate_attribute(e: _Errors, attribute: r.DeviceAttribute, path: str) -> int:
    """Validate one attribute and return how many values it holds."""
    members = {
        "int": attribute.int_,
        "bool": attribute.bool_,
        "string": attribute.string,
        "version": attribute.version,
        "ints": attribute.ints,
        "bools": attribute.bools,
        "strings": attribute.strings,
        "versions": attribute.versions,
    }
    present = [name for name, value in members.items() if value is not None]
    if not present:
        e.add(path, "Required value: exactly one value must be specified")
        return 0
    if len(present) > 1:
        e.add(path, f"Invalid value: exactly one value must be specified, got {', '.join(present)}")
        return len(present)
    ints = [("int", attribute.int_)] if attribute.int_ is not None else []
    ints += [(f"ints[{i}]", n) for i, n in enumerate(attribute.ints or [])]
    for name, number in ints:
        if not -(1 << 63) <= number < (1 << 63):
            e.add(_field(path, name), f"Invalid value: {number}: does not fit in an int64")
    max_len = LIMITS["attribute_string_length"]
    strings: list[tuple[str, str]] = []
    if attribute.string is not None:
        strings.append(("string", attribute.string))
    for i, s in enumerate(attribute.strings or []):
        strings.append((f"strings[{i}]", s))
    for name, value in strings:
        if len(value) > max_len:
            e.add(_field(path, name), f"Too long: may not be more than {max_len} bytes")
    versions: list[tuple[str, str]] = []
    if attribute.version is not None:
        versions.append(("version", attribute.version))
    for i, v in enumerate(attribute.versions or []):
        versions.append((f"versions[{i}]", v))
    for name, value in versions:
        if len(value) > max_len:
            e.add(_field(path, name), f"Too long: may not be more than {max_len} bytes")
        if not _SEMVER.match(value):
            e.add(
                _field(path, name),
                f"Invalid value: {value!r}: must be a string compatible with semver.org spec 2.0.0",
            )
    chosen = members[present[0]]
    return len(chosen) if isinstance(chosen, list) else 1


def _validate_request_policy(
    e: _Errors, policy: r.CapacityRequestPolicy, capacity: Quantity, path: str
) -> None:
    if policy.valid_values and policy.valid_range is not None:
        e.add(
            path,
            'Forbidden: exactly one policy can be specified, cannot specify "validValues" and '
            '"validRange" at the same time',
        )
        return
    default = policy.default
    if policy.valid_values:
        vp = _field(path, "validValues")
        if default is None:
            e.add(_field(path, "default"), "Required value: required when validValues is defined")
            return
        values = policy.valid_values
        for i in range(len(values) - 1):
            if values[i] > values[i + 1]:
                e.add(
                    _index(vp, i + 1),
                    f"Invalid value: {str(values[i + 1])!r}: values must be sorted in ascending "
                    "order",
                )
        if e.too_many(vp, values, LIMITS["valid_values"]):
            return
        seen: set[int] = set()
        for i, value in enumerate(values):
            if value > capacity:
                e.add(
                    _index(vp, i),
                    f"Invalid value: {str(value)!r}: option is larger than capacity value: "
                    f"{capacity}",
                )
            if value.value_ceil() in seen:
                e.add(_index(vp, i), f"Duplicate value: {str(value)!r}")
            seen.add(value.value_ceil())
        if default not in values:
            e.add(
                vp,
                f"Invalid value: {str(default)!r}: default value is not valid according to the "
                "requestPolicy",
            )
    elif policy.valid_range is not None:
        rng = policy.valid_range
        rp = _field(path, "validRange")
        if default is None:
            e.add(_field(path, "default"), "Required value: required when validRange is defined")
            return
        if "min" not in rng.model_fields_set:
            e.add(_field(rp, "min"), "Required value: required when validRange is defined")
            return
        if rng.min > capacity:
            e.add(
                _field(rp, "min"),
                f"Invalid value: {str(rng.min)!r}: min is larger than capacity value: {capacity}",
            )
        if default < rng.min:
            e.add(
                _field(rp, "min"),
                f"Invalid value: {str(default)!r}: default is less than min: {rng.min}",
            )
        if rng.max is not None:
            if rng.min > rng.max:
                e.add(
                    _field(rp, "max"),
                    f"Invalid value: {str(rng.min)!r}: min is larger than max: {rng.max}",
                )
            if rng.max > capacity:
                e.add(
                    _field(rp, "max"),
                    f"Invalid value: {str(rng.max)!r}: max is larger than capacity value: "
                    f"{capacity}",
                )
            if default > rng.max:
                e.add(
                    _field(rp, "max"),
                    f"Invalid value: {str(default)!r}: default is more than max: {rng.max}",
                )
        if rng.step is not None:
            if rng.min + rng.step > capacity:
                e.add(
                    _field(rp, "step"),
                    f"Invalid value: {str(rng.step)!r}: one step {rng.min + rng.step} is larger "
                    f"than capacity value: {capacity}",
                )
            step = rng.step.value_ceil()
            for checked in (default, rng.max):
                if checked is None:
                    continue
                if step == 0 or (checked.value_ceil() - rng.min.value_ceil()) % step != 0:
                    e.add(
                        _field(rp, "step"),
                        f"Invalid value: {str(checked)!r}: value is not a multiple of a given step "
                        f"({rng.step}) from ({rng.min})",
                    )
