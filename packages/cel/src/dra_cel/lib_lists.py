"""List functions: the Kubernetes list library, ``ext.Lists`` (version 3) and ``ext.Sets``."""

from __future__ import annotations

from collections.abc import Callable
from functools import cmp_to_key
from typing import Any, Final

from dra_api_types import Quantity, Version

from .errors import CelRuntimeError
from .overloads import DYN, OPTIONAL, define, list_cost
from .syntax import UINT64_MAX, UInt
from .temporal import Duration, Timestamp
from .values import NONE, Optional, cel_equals, check_int, compare, type_name

# --------------------------------------------------------------------- lists (k8s)
_ORDERED_CLASSES: Final = (str, bytes, bool, Version, Quantity, Timestamp, Duration)


def _require_comparable(items: list[Any], what: str) -> None:
    if not items:
        return
    first = type(items[0])
    numeric = {int, UInt, float}
    for x in items:
        if type(x) is not first and not (first in numeric and type(x) in numeric):
            raise CelRuntimeError(f"{what}: list elements must have the same comparable type")
    if first not in numeric and first not in _ORDERED_CLASSES:
        raise CelRuntimeError(f"{what}: elements of type {type_name(items[0])} are not ordered")


def _order(a: Any, b: Any) -> int:
    if type(a) in (Version, Quantity):
        return -1 if a < b else (1 if b < a else 0)
    return compare("sort", a, b)


def _is_sorted(items: list[Any]) -> bool:
    _require_comparable(items, "isSorted")
    return all(_order(items[i], items[i + 1]) <= 0 for i in range(len(items) - 1))


def _sum(items: list[Any]) -> Any:
    if not items:
        return 0
    first = type(items[0])
    if first is Quantity:
        total: Any = items[0]
        for x in items[1:]:
            if type(x) is not Quantity:
                raise CelRuntimeError("sum: list elements must have the same type")
            total = total + x
        return total
    if first not in (int, UInt, float) or any(type(x) is not first for x in items):
        raise CelRuntimeError("sum: list elements must all be int, uint or double")
    result = sum(items)
    if first is int:
        return check_int(result)
    if first is UInt:
        if result > UINT64_MAX:
            raise CelRuntimeError("unsigned integer overflow")
        return UInt(result)
    return float(result)


def _min(items: list[Any]) -> Any:
    if not items:
        raise CelRuntimeError("min called on empty list")
    _require_comparable(items, "min")
    best = items[0]
    for x in items[1:]:
        if _order(x, best) < 0:
            best = x
    return best


def _max(items: list[Any]) -> Any:
    if not items:
        raise CelRuntimeError("max called on empty list")
    _require_comparable(items, "max")
    best = items[0]
    for x in items[1:]:
        if _order(x, best) > 0:
            best = x
    return best


def _list_index_of(items: list[Any], value: Any) -> int:
    for i, x in enumerate(items):
        if cel_equals(x, value):
            return i
    return -1


def _list_last_index_of(items: list[Any], value: Any) -> int:
    for i in range(len(items) - 1, -1, -1):
        if cel_equals(items[i], value):
            return i
    return -1


define("isSorted", ("list",), "bool", _is_sorted, cost=list_cost)
define("sum", ("list",), DYN, _sum, cost=list_cost)
define("min", ("list",), DYN, _min, cost=list_cost)
define("max", ("list",), DYN, _max, cost=list_cost)
define("indexOf", ("list", DYN), "int", _list_index_of, cost=list_cost)
define("lastIndexOf", ("list", DYN), "int", _list_last_index_of, cost=list_cost)


# --------------------------------------------------------------------- lists (ext v3)
def _slice(items: list[Any], start: int, end: int) -> list[Any]:
    if start < 0 or end < 0:
        raise CelRuntimeError(f"cannot slice([{start}:{end}]), negative indexes not supported")
    if start > end:
        raise CelRuntimeError(
            f"cannot slice([{start}:{end}]), start index must be less than or equal to end index"
        )
    if end > len(items):
        raise CelRuntimeError(f"cannot slice([{start}:{end}]), list is length {len(items)}")
    return items[start:end]


def _flatten(items: list[Any], depth: int = 1) -> list[Any]:
    if depth < 0:
        raise CelRuntimeError("level must be non-negative")
    out: list[Any] = []
    for x in items:
        if type(x) is list and depth > 0:
            out.extend(_flatten(x, depth - 1))
        else:
            out.append(x)
    return out


def _range(n: int) -> list[int]:
    if n < 0:
        raise CelRuntimeError("lists.range: argument must be non-negative")
    if n > 1_000_000:
        raise CelRuntimeError("lists.range: argument too large")
    return list(range(n))


def _distinct(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for x in items:
        if not any(cel_equals(x, y) for y in out):
            out.append(x)
    return out


def _reverse(items: list[Any]) -> list[Any]:
    return items[::-1]


def sorted_by_keys(keys: list[Any], items: list[Any]) -> list[tuple[Any, Any]]:
    """Pairs (key, item) stably sorted by key; keys must share one ordered type."""
    _require_comparable(keys, "sortBy")
    pairs = list(zip(keys, items, strict=True))

    def by_key(a: tuple[Any, Any], b: tuple[Any, Any]) -> int:
        return _order(a[0], b[0])

    pairs.sort(key=cmp_to_key(by_key))
    return pairs


def _sort(items: list[Any]) -> list[Any]:
    _require_comparable(items, "sort")
    return sorted(items, key=cmp_to_key(_order))


def _first(items: list[Any]) -> Optional:
    return Optional(items[0]) if items else NONE


def _last(items: list[Any]) -> Optional:
    return Optional(items[-1]) if items else NONE


define("slice", ("list", "int", "int"), "list", _slice, cost=list_cost)
define("flatten", ("list",), "list", _flatten, cost=list_cost)
define("flatten", ("list", "int"), "list", _flatten, cost=list_cost)
define("lists.range", ("int",), "list", _range, receiver=False, cost=lambda n: 1 + max(n, 0))
define("distinct", ("list",), "list", _distinct, cost=lambda x: 1 + len(x) * len(x))
define("reverse", ("list",), "list", _reverse, cost=list_cost)
define("sort", ("list",), "list", _sort, cost=list_cost)
define("first", ("list",), OPTIONAL, _first)
define("last", ("list",), OPTIONAL, _last)


# --------------------------------------------------------------------- sets
def _sets_contains(a: list[Any], b: list[Any]) -> bool:
    return all(any(cel_equals(x, y) for y in a) for x in b)


def _sets_equivalent(a: list[Any], b: list[Any]) -> bool:
    return _sets_contains(a, b) and _sets_contains(b, a)


def _sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(any(cel_equals(x, y) for y in a) for x in b)


def _pair_cost(a: list[Any], b: list[Any]) -> int:
    return 1 + len(a) * len(b)


_impl: Callable[..., Any]
for _name, _impl in (
    ("sets.contains", _sets_contains),
    ("sets.equivalent", _sets_equivalent),
    ("sets.intersects", _sets_intersects),
):
    define(_name, ("list", "list"), "bool", _impl, receiver=False, cost=_pair_cost)
