"""Consumable capacity: request policies, rounding, and what a share consumes.

Rounding follows upstream's ``consumable_capacity.go``: a request below ``validRange.min``
takes the minimum, above it it is rounded up to the next step from the minimum. With
DRAFractionalCapacityRange (1.37) the arithmetic is on milli values whenever min, max and
step are exact in milli units (and the step is at least ``1m``), so ``0.5``/``500m``/
``1.5Gi`` steps round exactly; otherwise, and always in 1.36, on ``Quantity.Value()``
(fractions rounded up to integers). ``validValues`` take the first value not below the
request, compared exactly. A request that cannot be represented in the milli arithmetic,
or a negative consumption, is an error for the whole allocation, as upstream.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from dra_api_types import Amount, Quantity, QuantityFormat, QuantityIdentity, parsed_identity

from .errors import CapacityRequestError
from .model import CapacityInfo, DeviceInfo

# name -> (exact value, value as written, for the result)
Consumption = dict[str, tuple[Amount, object]]
_INT64_MAX = 2**63 - 1
_BY_VALUE = object()


def consumed_value(
    requested: tuple[Amount, object] | None, cap: CapacityInfo, *, fractional: bool = False
) -> tuple[Amount, object]:
    """What one allocation consumes of a capacity, after the policy's rounding.

    Raises :class:`CapacityRequestError` when the rounding cannot be represented.
    """
    value, raw, _ = _consume(requested, cap, fractional=fractional)
    return value, raw


def milli_value(value: Amount) -> int | None:
    """``safeMilliValue``: the value in milli units if that is exact (and fits an int64)."""
    scaled = Fraction(value) * 1000
    if scaled.denominator != 1 or abs(scaled.numerator) > _INT64_MAX:
        return None
    return scaled.numerator


@functools.lru_cache(maxsize=1024)
def _format_of(raw: str) -> QuantityFormat:
    """The format ``ParseQuantity`` gives a written quantity (the step's, for rounding)."""
    return Quantity.coerce(raw).format


def _identity(raw: object) -> QuantityIdentity:
    return None if raw is None else parsed_identity(str(raw))


def _consume(
    requested: tuple[Amount, object] | None, cap: CapacityInfo, *, fractional: bool
) -> tuple[Amount, object, QuantityIdentity]:
    """consumed_value, plus the Quantity identity Go's policy check compares with ``==``."""
    if requested is None:
        if cap.default is not None:
            return cap.default, cap.default_raw, _identity(cap.default_raw)
        return cap.value, None, None
    ident = _identity(requested[1])
    if not cap.has_policy:
        return requested[0], requested[1], ident
    if cap.has_range and cap.range_min is not None:
        value = requested[0]
        if value < cap.range_min:
            return cap.range_min, cap.range_min_raw, _identity(cap.range_min_raw)
        if cap.range_step is None:
            return requested[0], requested[1], ident
        fmt = _format_of(str(cap.range_step_raw)).value
        if use_milli(cap, fractional=fractional):
            req_milli = milli_value(value)
            if req_milli is None:
                raise CapacityRequestError(
                    f"capacity request {requested[1]} is not a representable milli value",
                    field="capacity.requests",
                )
            step, low = _exact_milli(cap.range_step), _exact_milli(cap.range_min)
            n = _ceil_div(req_milli - low, step)
            if n > (_INT64_MAX - low) // step:
                raise CapacityRequestError(
                    f"rounding capacity request {requested[1]} up to the next step passes "
                    "the milli-value range",
                    field="capacity.requests",
                )
            milli = low + step * n
            # NewQuantity for whole numbers, NewMilliQuantity otherwise, in the step's format.
            if milli % 1000 == 0:
                rounded: Amount = milli // 1000
                new_ident: QuantityIdentity = (milli // 1000, 0, "", fmt)
            else:
                rounded = Fraction(milli, 1000)
                new_ident = (milli, -3, "", fmt)
        else:
            # Quantity.Value() rounds fractions up to the next integer.
            req_int, step, low = _ceil(value), _ceil(cap.range_step), _ceil(cap.range_min)
            if req_int > _INT64_MAX:
                raise CapacityRequestError(
                    f"capacity request {requested[1]} exceeds MaxInt64", field="capacity.requests"
                )
            n = _ceil_div(req_int - low, step)
            if low >= 0 and n > (_INT64_MAX - low) // step:
                raise CapacityRequestError(
                    f"rounding capacity request {requested[1]} up to the next step passes MaxInt64",
                    field="capacity.requests",
                )
            rounded = low + step * n
            new_ident = (rounded, 0, "", fmt)
        return rounded, _written_as(rounded, cap.range_step_raw), new_ident
    if cap.valid_values:
        for valid, raw in cap.valid_values:
            if requested[0] <= valid:
                return valid, raw, _identity(raw)
    return requested[0], requested[1], ident


def use_milli(cap: CapacityInfo, *, fractional: bool) -> bool:
    """``useMilli``: the gate on, min/max/step exact in milli units, and a step of 1m or more."""
    if not fractional:
        return False
    for bound in (cap.range_min, cap.range_max, cap.range_step):
        if bound is not None and milli_value(bound) is None:
            return False
    return cap.range_step is None or _exact_milli(cap.range_step) >= 1


def violates_policy(
    value: Amount,
    cap: CapacityInfo,
    *,
    fractional: bool = False,
    identity: QuantityIdentity | object = _BY_VALUE,
) -> bool:
    """Whether a (rounded) consumption is outside the capacity's request policy.

    A consumption equal to the policy's default is accepted as it is. Upstream compares
    the two Quantity structs, not their values: pass the consumption's ``identity`` (see
    ``dra_api_types.parsed_identity``) for that; without one the values are compared.
    """
    if not cap.has_policy:
        return False
    if cap.default is not None:
        if identity is _BY_VALUE:
            if value == cap.default:
                return False
        elif identity is not None and identity == _identity(cap.default_raw):
            return False
    if cap.has_range:
        if cap.range_max is not None and value > cap.range_max:
            return True
        if cap.range_step is not None:
            if use_milli(cap, fractional=fractional):
                requested = milli_value(value)
                if requested is None:
                    return True
                step = _exact_milli(cap.range_step)
                low = _exact_milli(cap.range_min) if cap.range_min is not None else 0
            else:
                requested, step = _ceil(value), _ceil(cap.range_step)
                low = _ceil(cap.range_min) if cap.range_min is not None else 0
            # It must be a multiple of the step from the minimum.
            return (requested - low) % step != 0
        return False
    if cap.valid_values:
        return all(value != valid for valid, _ in cap.valid_values)
    return False


@dataclass(frozen=True, slots=True)
class CapacityMiss:
    """A capacity of a device that cannot take a request: what it would take, what is left."""

    name: str
    consumed: Amount
    left: Amount
    total: Amount
    outside_policy: bool


def format_amount(value: Amount) -> str:
    """An amount as Kubernetes writes a binary quantity (``81559Mi``, ``4``, ``500m``)."""
    return str(Quantity(value, QuantityFormat.BINARY_SI))


def missing_capacity(
    dev: DeviceInfo, requests: Mapping[str, tuple[Amount, object]] | None
) -> str | None:
    """The first requested capacity the device does not have, or None."""
    for name in requests or ():
        if name not in dev.capacity:
            return name
    return None


def fits(
    dev: DeviceInfo,
    requests: Mapping[str, tuple[Amount, object]] | None,
    *,
    allocated: Mapping[str, Amount] | None,
    allocating: Mapping[str, Amount] | None,
    fractional: bool = False,
) -> bool | None:
    """CmpRequestOverCapacity: ``None`` if a requested capacity does not exist on the device."""
    if missing_capacity(dev, requests) is not None:
        return None
    miss = first_miss(
        dev, requests, allocated=allocated, allocating=allocating, fractional=fractional
    )
    return miss is None


def first_miss(
    dev: DeviceInfo,
    requests: Mapping[str, tuple[Amount, object]] | None,
    *,
    allocated: Mapping[str, Amount] | None,
    allocating: Mapping[str, Amount] | None,
    fractional: bool = False,
) -> CapacityMiss | None:
    """The first capacity (in the device's order) that cannot take the request, or None.

    Every capacity is rounded before any is checked, so an unrepresentable request is an
    error whichever capacity comes first. The device must have every requested capacity
    (:func:`missing_capacity`).
    """
    consumed = {
        name: _consume(requests.get(name) if requests else None, cap, fractional=fractional)
        for name, cap in dev.capacity.items()
    }
    for name, (value, _, _) in consumed.items():
        if value < 0:
            raise CapacityRequestError(
                f"device {'/'.join(dev.id)}: capacity {name}: capacity value is negative",
                object_ref=dev.slice.ref,
                field=f"capacity.{name}",
            )
    for name, cap in dev.capacity.items():
        value, _, ident = consumed[name]
        used = (allocated or {}).get(name, 0) + (allocating or {}).get(name, 0)
        if violates_policy(value, cap, fractional=fractional, identity=ident):
            return CapacityMiss(name, value, cap.value - used, cap.value, outside_policy=True)
        if value + used > cap.value:
            return CapacityMiss(name, value, cap.value - used, cap.value, outside_policy=False)
    return None


def consumption(
    dev: DeviceInfo,
    requests: Mapping[str, tuple[Amount, object]] | None,
    *,
    fractional: bool = False,
) -> Consumption:
    """GetConsumedCapacityFromRequest: every capacity of the device, rounded."""
    return {
        name: consumed_value(requests.get(name) if requests else None, cap, fractional=fractional)
        for name, cap in dev.capacity.items()
    }


def _written_as(value: Amount, step_raw: object) -> object:
    """A rounded value as upstream writes it: in the format of the step.

    ``None`` stands for BinarySI (see ``results.format_quantity``); decimal formats are
    given as their canonical text.
    """
    fmt = _format_of(str(step_raw))
    if fmt is QuantityFormat.BINARY_SI:
        return None
    return Quantity(value, fmt).canonical()


def _exact_milli(value: Amount) -> int:
    milli = milli_value(value)
    assert milli is not None, "checked by use_milli"
    return milli


def _ceil_div(a: int, b: int) -> int:
    return -((-a) // b)


def _ceil(value: Amount) -> int:
    return -((-value.numerator) // value.denominator)
