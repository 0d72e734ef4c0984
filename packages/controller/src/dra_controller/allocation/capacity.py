"""Consumable capacity: request policies, rounding, and what a share consumes."""

from __future__ import annotations

from collections.abc import Mapping

from .model import CapacityInfo, DeviceInfo
from .quantities import Amount

# name -> (exact value, value as written, for the result)
Consumption = dict[str, tuple[Amount, object]]


def consumed_value(
    requested: tuple[Amount, object] | None, cap: CapacityInfo
) -> tuple[Amount, object]:
    """What one allocation consumes of a capacity, after the policy's rounding."""
    if requested is None:
        if cap.default is not None:
            return cap.default, cap.default_raw
        return cap.value, None
    if not cap.has_policy:
        return requested
    if cap.has_range and cap.range_min is not None:
        value = requested[0]
        if value < cap.range_min:
            return cap.range_min, cap.range_min_raw
        if cap.range_step is None:
            return requested
        # Upstream rounds on integer values (Quantity.Value() rounds up fractions).
        req_int = _ceil(value)
        step = _ceil(cap.range_step)
        low = _ceil(cap.range_min)
        n, mod = divmod(req_int - low, step)
        if mod:
            n += 1
        return low + step * n, None
    if cap.valid_values:
        for valid, raw in cap.valid_values:
            if requested[0] <= valid:
                return valid, raw
    return requested


def violates_policy(value: Amount, cap: CapacityInfo) -> bool:
    """Whether a (rounded) consumption is outside the capacity's request policy."""
    if not cap.has_policy:
        return False
    if cap.default is not None and value == cap.default:
        return False
    if cap.has_range:
        if cap.range_max is not None and value > cap.range_max:
            return True
        if cap.range_step is not None:
            low = _ceil(cap.range_min) if cap.range_min is not None else 0
            if (_ceil(value) - low) % _ceil(cap.range_step) != 0:
                return True
        return False
    if cap.valid_values:
        return all(value != valid for valid, _ in cap.valid_values)
    return False


def fits(
    dev: DeviceInfo,
    requests: Mapping[str, tuple[Amount, object]] | None,
    *,
    allocated: Mapping[str, Amount] | None,
    allocating: Mapping[str, Amount] | None,
) -> bool | None:
    """CmpRequestOverCapacity: ``None`` if a requested capacity does not exist on the device."""
    if requests:
        for name in requests:
            if name not in dev.capacity:
                return None
    for name, cap in dev.capacity.items():
        value, _ = consumed_value(requests.get(name) if requests else None, cap)
        if violates_policy(value, cap):
            return False
        total = value
        if allocated and name in allocated:
            total += allocated[name]
        if allocating and name in allocating:
            total += allocating[name]
        if total > cap.value:
            return False
    return True


def consumption(
    dev: DeviceInfo, requests: Mapping[str, tuple[Amount, object]] | None
) -> Consumption:
    """GetConsumedCapacityFromRequest: every capacity of the device, rounded."""
    return {
        name: consumed_value(requests.get(name) if requests else None, cap)
        for name, cap in dev.capacity.items()
    }


def _ceil(value: Amount) -> int:
    return -((-value.numerator) // value.denominator)
