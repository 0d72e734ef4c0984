"""CEL runtime values and the core operators over them.

Python values stand for CEL values: ``bool``, ``int`` (int64), :class:`UInt`, ``float``
(double), ``str``, ``bytes``, ``None`` (null), ``list``, ``dict`` (map),
``Version`` (semver), ``Quantity``, :class:`Optional` and :class:`CelType`.
"""

from __future__ import annotations

import math
from typing import Any, Final

from dra_api_types import Quantity, Version

from .device import CelDevice, DomainMap
from .errors import CelRuntimeError
from .formats import FORMAT_TYPE, NamedFormat
from .network import CIDR, CIDR_TYPE, IP, IP_TYPE
from .syntax import INT64_MAX, INT64_MIN, UINT64_MAX, UInt
from .temporal import DURATION_TYPE, TIMESTAMP_TYPE, Duration, Timestamp
from .urls import URL, URL_TYPE


class CelType:
    """A CEL type value, as returned by ``type(x)`` and named by ``int``, ``string``..."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


class Optional:
    """A CEL ``optional_type`` value: either empty or holding one value."""

    __slots__ = ("has_value", "value")

    def __init__(self, value: Any, *, has_value: bool = True) -> None:
        self.value = value
        self.has_value = has_value

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.has_value else "optional.none()"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Optional):
            return False
        if not self.has_value or not other.has_value:
            return self.has_value == other.has_value
        return cel_equals(self.value, other.value)

    def __hash__(self) -> int:
        return 0


NONE: Final = Optional(None, has_value=False)

TYPE_NAMES: Final[dict[type, str]] = {
    bool: "bool",
    int: "int",
    UInt: "uint",
    float: "double",
    str: "string",
    bytes: "bytes",
    type(None): "null_type",
    list: "list",
    dict: "map",
    DomainMap: "map",
    Version: "kubernetes.Semver",
    Quantity: "kubernetes.Quantity",
    Optional: "optional_type",
    CelType: "type",
    CelDevice: "kubernetes.DRADevice",
    IP: IP_TYPE,
    CIDR: CIDR_TYPE,
    Timestamp: TIMESTAMP_TYPE,
    Duration: DURATION_TYPE,
    URL: URL_TYPE,
    NamedFormat: FORMAT_TYPE,
}
TYPES: Final[dict[str, CelType]] = {
    name: CelType(name)
    for name in ("bool", "int", "uint", "double", "string", "bytes", "null_type", "list", "map")
} | {"type": CelType("type")}


def type_name(value: Any) -> str:
    """The CEL type name of a runtime value (for messages and ``type()``)."""
    return TYPE_NAMES.get(type(value), type(value).__name__)


def no_overload(function: str, *args: Any) -> CelRuntimeError:
    """The runtime error for a function applied to argument types it does not support."""
    kinds = ", ".join(type_name(a) for a in args)
    return CelRuntimeError(f"no such overload: {function}({kinds})")


_NUMERIC: Final = frozenset((int, UInt, float))
#: The Python classes of CEL numbers, for ``type(x) in NUMBER_CLASSES`` checks.
NUMBER_CLASSES: Final = (int, UInt, float)


def cel_equals(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: different types are unequal, numbers compare by value."""
    ta = type(a)
    tb = type(b)
    if ta is tb or (ta in _MAPS and tb in _MAPS):
        if ta is list:
            return len(a) == len(b) and all(cel_equals(x, y) for x, y in zip(a, b, strict=True))
        if ta is dict or ta is DomainMap:
            if len(a) != len(b):
                return False
            for key, value in a.items():
                other = _map_get(b, key)
                if other is _MISSING or not cel_equals(value, other):
                    return False
            return True
        return bool(a == b)
    if ta in _NUMERIC and tb in _NUMERIC:
        return bool(a == b)
    return False


_MAPS: Final[frozenset[type]] = frozenset((dict, DomainMap))
_MISSING: Final = object()


def _has_exact_key(m: dict[Any, Any], key: Any) -> bool:
    """``key in m`` where bool keys never equal numeric keys (unlike Python's ``True == 1``)."""
    if key not in m:
        return False
    if type(key) is str:
        return True
    key_is_bool = type(key) is bool
    return any(k == key and (type(k) is bool) == key_is_bool for k in m)


def _map_get(m: dict[Any, Any], key: Any) -> Any:
    if not _has_exact_key(m, key):
        return _MISSING
    return m[key]


def _normalize_key(key: Any) -> Any:
    t = type(key)
    if t in _KEY_TYPES:
        return key
    if t is float and key.is_integer():
        return int(key)
    raise CelRuntimeError(f"unsupported key type: {type_name(key)}")


def map_lookup(m: dict[Any, Any], key: Any) -> Any:
    """``m[key]``: a missing key is the runtime error ``no such key``."""
    key = _normalize_key(key)
    if not _has_exact_key(m, key):
        raise CelRuntimeError(f"no such key: {key}")
    return m[key]


def map_contains(m: dict[Any, Any], key: Any) -> bool:
    """``key in m`` with CEL's key typing (bool keys never equal int keys)."""
    if type(key) is float:
        if not key.is_integer():
            return False
        key = int(key)
    elif type(key) not in _KEY_TYPES:
        return False
    return _has_exact_key(m, key)


_KEY_TYPES: Final = frozenset((str, int, UInt, bool))


def list_index(items: list[Any], index: Any) -> Any:
    """``items[index]`` with CEL's bounds and index-type checks."""
    t = type(index)
    if t is float:
        if not index.is_integer():
            raise CelRuntimeError(f"unsupported index value: {index}")
        index = int(index)
    elif t is not int and t is not UInt:
        raise CelRuntimeError(f"unsupported index type: {type_name(index)}")
    if 0 <= index < len(items):
        return items[index]
    raise CelRuntimeError(f"index out of bounds: {index}")


def cel_in(item: Any, container: Any) -> bool:
    """The ``in`` operator."""
    t = type(container)
    if t is list:
        return any(cel_equals(item, x) for x in container)
    if t is dict or t is DomainMap:
        return map_contains(container, item)
    raise no_overload("@in", item, container)


def check_int(value: int) -> int:
    """Raise the CEL overflow error when ``value`` leaves int64."""
    if INT64_MIN <= value <= INT64_MAX:
        return value
    raise CelRuntimeError("integer overflow")


def check_uint(value: int) -> UInt:
    """Raise the CEL overflow error when ``value`` leaves uint64."""
    if 0 <= value <= UINT64_MAX:
        return UInt(value)
    raise CelRuntimeError("unsigned integer overflow")


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def add(a: Any, b: Any) -> Any:
    """``a + b``."""
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return check_int(a + b)
        if ta is float or ta is str or ta is bytes:
            return a + b
        if ta is UInt:
            return check_uint(a + b)
        if ta is list:
            return a + b
        if ta is Duration:
            return Duration(a.ns + b.ns)
    if ta is Timestamp and tb is Duration:
        return Timestamp(a.ns + b.ns)
    if ta is Duration and tb is Timestamp:
        return Timestamp(a.ns + b.ns)
    raise no_overload("_+_", a, b)


def subtract(a: Any, b: Any) -> Any:
    """``a - b``."""
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return check_int(a - b)
        if ta is float:
            return a - b
        if ta is UInt:
            return check_uint(a - b)
        if ta is Duration:
            return Duration(a.ns - b.ns)
        if ta is Timestamp:
            return Duration(a.ns - b.ns)
    if ta is Timestamp and tb is Duration:
        return Timestamp(a.ns - b.ns)
    raise no_overload("_-_", a, b)


def multiply(a: Any, b: Any) -> Any:
    """``a * b``."""
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int:
            return check_int(a * b)
        if ta is float:
            return a * b
        if ta is UInt:
            return check_uint(a * b)
    raise no_overload("_*_", a, b)


def divide(a: Any, b: Any) -> Any:
    """``a / b``: integer division truncates toward zero as in Go."""
    ta, tb = type(a), type(b)
    if ta is tb:
        if ta is int or ta is UInt:
            if b == 0:
                raise CelRuntimeError("division by zero")
            result = _trunc_div(a, b)
            return check_int(result) if ta is int else UInt(result)
        if ta is float:
            if b == 0.0:
                if a == 0.0 or math.isnan(a):
                    return math.nan
                return math.copysign(math.inf, a) * math.copysign(1.0, b)
            return a / b
    raise no_overload("_/_", a, b)


def modulo(a: Any, b: Any) -> Any:
    """``a % b``: the remainder has the dividend's sign as in Go."""
    ta, tb = type(a), type(b)
    if ta is tb and (ta is int or ta is UInt):
        if b == 0:
            raise CelRuntimeError("modulus by zero")
        if ta is int and a == INT64_MIN and b == -1:
            raise CelRuntimeError("integer overflow")
        result = a - b * _trunc_div(a, b)
        return result if ta is int else UInt(result)
    raise no_overload("_%_", a, b)


def negate(a: Any) -> Any:
    """``-a``."""
    t = type(a)
    if t is int:
        return check_int(-a)
    if t is float:
        return -a
    raise no_overload("-_", a)


def logical_not(a: Any) -> bool:
    """``!a``."""
    if a is True:
        return False
    if a is False:
        return True
    raise no_overload("!_", a)


_ORDERED: Final = frozenset((str, bytes, bool, Timestamp, Duration))


def compare(function: str, a: Any, b: Any) -> int:
    """Three-way comparison for ``<``, ``<=``, ``>``, ``>=``; NaN compares as unordered (2)."""
    ta, tb = type(a), type(b)
    if (ta in _NUMERIC and tb in _NUMERIC) or (ta is tb and ta in _ORDERED):
        if a < b:
            return -1
        if a > b:
            return 1
        if a == b:
            return 0
        return 2  # NaN
    raise no_overload(function, a, b)


def less(a: Any, b: Any) -> bool:
    """``a < b``."""
    return compare("_<_", a, b) == -1


def less_equal(a: Any, b: Any) -> bool:
    """``a <= b``."""
    return compare("_<=_", a, b) in (-1, 0)


def greater(a: Any, b: Any) -> bool:
    """``a > b``."""
    return compare("_>_", a, b) == 1


def greater_equal(a: Any, b: Any) -> bool:
    """``a >= b``."""
    return compare("_>=_", a, b) in (0, 1)


def select_field(operand: Any, field: str) -> Any:
    """``operand.field`` on a map or the device object."""
    t = type(operand)
    if t is dict or t is DomainMap:
        try:
            return operand[field]
        except KeyError:
            raise CelRuntimeError(f"no such key: {field}") from None
    if t is CelDevice:
        return device_field(operand, field)
    raise CelRuntimeError(f"type '{type_name(operand)}' does not support field selection")


def has_field(operand: Any, field: str) -> bool:
    """``has(operand.field)``."""
    t = type(operand)
    if t is dict or t is DomainMap:
        return field in operand
    if t is CelDevice:
        return field in DEVICE_FIELDS
    raise CelRuntimeError(f"type '{type_name(operand)}' does not support field selection")


DEVICE_FIELDS: Final = frozenset(("driver", "attributes", "capacity", "allowMultipleAllocations"))


def device_field(device: CelDevice, field: str) -> Any:
    """A field of the ``device`` variable."""
    if field == "driver":
        return device.driver
    if field == "attributes":
        return device.attribute_domains
    if field == "capacity":
        return device.capacity_domains
    if field == "allowMultipleAllocations":
        return device.allow_multiple_allocations
    raise CelRuntimeError(f"no such field: {field}")


def index_value(operand: Any, index: Any) -> Any:
    """``operand[index]``."""
    t = type(operand)
    if t is list:
        return list_index(operand, index)
    if t is dict or t is DomainMap:
        if t is DomainMap and type(index) is str:
            return operand[index]
        return map_lookup(operand, index)
    raise no_overload("_[_]", operand, index)
