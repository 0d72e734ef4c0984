"""The functions of the DRA CEL environment.

The set is upstream's base environment as DRA uses it: the CEL standard functions,
``ext.Strings`` (version 2), ``ext.Sets``, ``ext.Lists`` (version 3), the Kubernetes
list, regex, quantity and semver (version 1) libraries, and optional values.
Macros (``has``, ``all``, ``exists``, ``exists_one``, ``map``, ``filter``,
``cel.bind``, ``optMap``, ``optFlatMap``) and operators live in the compiler.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Any, Final

from dra_api_types import Quantity, Version

from .errors import CelRuntimeError
from .regex import compile_regex
from .syntax import UINT64_MAX, UInt
from .values import (
    NONE,
    TYPES,
    CelType,
    Optional,
    cel_equals,
    check_int,
    compare,
    type_name,
)

DYN: Final = "dyn"
SEMVER: Final = "kubernetes.Semver"
QUANTITY: Final = "kubernetes.Quantity"
OPTIONAL: Final = "optional_type"


@dataclass(frozen=True, slots=True)
class Overload:
    """One overload: ``params`` includes the receiver first for method-style calls."""

    name: str
    receiver: bool
    params: tuple[str, ...]
    result: str
    impl: Callable[..., Any]
    cost: Callable[..., int] | None = None

    def accepts_static(self, types: tuple[str, ...]) -> bool:
        """Whether statically known argument types can reach this overload."""
        pairs = zip(self.params, types, strict=True)
        return all(p in (DYN, t) or t == DYN for p, t in pairs)

    def accepts(self, args: tuple[Any, ...]) -> bool:
        """Whether runtime argument values select this overload."""
        return all(p == DYN or type_name(a) == p for p, a in zip(self.params, args, strict=True))


FUNCTIONS: dict[str, list[Overload]] = {}


def _def(
    name: str,
    params: tuple[str, ...],
    result: str,
    impl: Callable[..., Any],
    *,
    receiver: bool = True,
    cost: Callable[..., int] | None = None,
) -> None:
    FUNCTIONS.setdefault(name, []).append(
        Overload(name, receiver=receiver, params=params, result=result, impl=impl, cost=cost)
    )


def _str_cost(s: Any, t: Any = "", *_: Any) -> int:
    """Traversal cost of the string receiver (and string argument), 0.1 per character."""
    return 1 + (len(s) + (len(t) if type(t) is str else 0)) // 10


def _list_cost(items: Any, *_: Any) -> int:
    return 1 + (len(items) if isinstance(items, list | dict) else 0)


# --------------------------------------------------------------------- size
def _size(value: Any) -> int:
    return len(value)


for _t in ("string", "bytes", "list", "map"):
    _def("size", (_t,), "int", _size, receiver=False)
    _def("size", (_t,), "int", _size)


# --------------------------------------------------------------------- strings
def _contains(s: str, sub: str) -> bool:
    return sub in s


def _starts_with(s: str, prefix: str) -> bool:
    return s.startswith(prefix)


def _ends_with(s: str, suffix: str) -> bool:
    return s.endswith(suffix)


def _matches(s: str, pattern: str) -> bool:
    return compile_regex(pattern).search(s)


_def("contains", ("string", "string"), "bool", _contains, cost=_str_cost)
_def("startsWith", ("string", "string"), "bool", _starts_with, cost=_str_cost)
_def("endsWith", ("string", "string"), "bool", _ends_with, cost=_str_cost)
_def("matches", ("string", "string"), "bool", _matches, cost=_str_cost)
_def("matches", ("string", "string"), "bool", _matches, receiver=False, cost=_str_cost)


def _check_index(s: str, index: int, what: str = "index") -> None:
    if index < 0 or index > len(s):
        raise CelRuntimeError(f"{what} out of range: {index}")


def _char_at(s: str, index: int) -> str:
    _check_index(s, index)
    return s[index] if index < len(s) else ""


def _index_of(s: str, sub: str, start: int = 0) -> int:
    _check_index(s, start)
    return s.find(sub, start)


def _last_index_of(s: str, sub: str, end: int | None = None) -> int:
    if end is None:
        return s.rfind(sub)
    _check_index(s, end)
    return s.rfind(sub, 0, end + len(sub))


_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_UPPER: Final = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _lower_ascii(s: str) -> str:
    return s.translate(_LOWER)


def _upper_ascii(s: str) -> str:
    return s.translate(_UPPER)


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    if n < 0:
        n = -1
    return s.replace(old, new, n)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        if 0 < n < len(chars):
            return [*chars[: n - 1], "".join(chars[n - 1 :])]
        return chars
    return s.split(sep, n - 1 if n > 0 else -1)


def _substring(s: str, start: int, end: int | None = None) -> str:
    if end is None:
        end = len(s)
    _check_index(s, start, "start index")
    _check_index(s, end, "end index")
    if start > end:
        raise CelRuntimeError(f"invalid substring range. start: {start}, end: {end}")
    return s[start:end]


# Go's unicode.IsSpace set, which ext.Strings trims.
_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


def _trim(s: str) -> str:
    return s.strip(_SPACE)


def _join(items: list[Any], sep: str = "") -> str:
    if not all(type(x) is str for x in items):
        raise CelRuntimeError("join: list must contain only strings")
    return sep.join(items)


def _quote(s: str) -> str:
    out = ['"']
    for c in s:
        out.append(_QUOTE_ESCAPES.get(c, c))
    out.append('"')
    return "".join(out)


_QUOTE_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}

_def("charAt", ("string", "int"), "string", _char_at)
_def("indexOf", ("string", "string"), "int", _index_of, cost=_str_cost)
_def("indexOf", ("string", "string", "int"), "int", _index_of, cost=_str_cost)
_def("lastIndexOf", ("string", "string"), "int", _last_index_of, cost=_str_cost)
_def("lastIndexOf", ("string", "string", "int"), "int", _last_index_of, cost=_str_cost)
_def("lowerAscii", ("string",), "string", _lower_ascii, cost=_str_cost)
_def("upperAscii", ("string",), "string", _upper_ascii, cost=_str_cost)
_def("replace", ("string", "string", "string"), "string", _replace, cost=_str_cost)
_def("replace", ("string", "string", "string", "int"), "string", _replace, cost=_str_cost)
_def("split", ("string", "string"), "list", _split, cost=_str_cost)
_def("split", ("string", "string", "int"), "list", _split, cost=_str_cost)
_def("substring", ("string", "int"), "string", _substring, cost=_str_cost)
_def("substring", ("string", "int", "int"), "string", _substring, cost=_str_cost)
_def("trim", ("string",), "string", _trim, cost=_str_cost)
_def("join", ("list",), "string", _join, cost=_list_cost)
_def("join", ("list", "string"), "string", _join, cost=_list_cost)
_def("strings.quote", ("string",), "string", _quote, receiver=False, cost=_str_cost)


def format_value(value: Any, verb: str = "s") -> str:
    """Render a value as ``string()``/``%s`` does."""
    t = type(value)
    if t is str:
        return str(value)
    if t is bool:
        return "true" if value else "false"
    if t is int or t is UInt:
        return str(int(value))
    if t is float:
        return format_double(value)
    if t is bytes:
        return bytes(value).decode("utf-8", errors="replace")
    if value is None:
        return "null"
    if t is list:
        return "[" + ", ".join(format_value(x) for x in value) + "]"
    if isinstance(value, dict):
        items = sorted(((format_value(k), format_value(v)) for k, v in value.items()))
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if t is Version or t is Quantity or t is CelType:
        return str(value)
    raise CelRuntimeError(f"format: unsupported type for %{verb}: {type_name(value)}")


def format_double(value: float) -> str:
    """Go's ``strconv.FormatFloat(v, 'g', -1, 64)``, which ``string(double)`` uses.

    Shortest round-trip digits (Python's ``repr`` finds the same ones); exponent form
    when the decimal exponent is below -4 or at least 6, Go's cut-off for shortest 'g'.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest_digits(abs(value))
    exp = exponent
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    if len(digits) <= exp + 1:
        return f"{sign}{digits}{'0' * (exp + 1 - len(digits))}"
    return f"{sign}{digits[: exp + 1]}.{digits[exp + 1 :]}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip significant digits and the decimal exponent of the first."""
    text = repr(value)
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    whole, _, fraction = mantissa.partition(".")
    if fraction == "0":
        fraction = ""
    digits = (whole + fraction).lstrip("0")
    # position of the decimal point relative to the first significant digit
    leading_zeros = len(whole + fraction) - len((whole + fraction).lstrip("0"))
    point = len(whole) - leading_zeros
    digits = digits.rstrip("0") or "0"
    return digits, exponent + point - 1


_FORMAT_RE: Final = re.compile(r"%(\.\d+)?([a-zA-Z%])")


def _format(fmt: str, args: list[Any]) -> str:
    out: list[str] = []
    pos = 0
    arg_index = 0
    for m in _FORMAT_RE.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        precision_text, verb = m.group(1), m.group(2)
        if verb == "%":
            out.append("%")
            continue
        if arg_index >= len(args):
            raise CelRuntimeError(f"format: index {arg_index} out of range")
        arg = args[arg_index]
        arg_index += 1
        precision = int(precision_text[1:]) if precision_text else None
        out.append(_format_one(arg, verb, precision))
    out.append(fmt[pos:])
    return "".join(out)


def _format_one(arg: Any, verb: str, precision: int | None) -> str:
    t = type(arg)
    if verb == "s":
        return format_value(arg)
    if verb == "d":
        if t is int or t is UInt:
            return str(int(arg))
        if t is float and (math.isnan(arg) or math.isinf(arg)):
            return format_double(arg)
        raise CelRuntimeError(f"format: %d requires an integer, got {type_name(arg)}")
    if verb in "fe":
        if t not in (int, UInt, float):
            raise CelRuntimeError(f"format: %{verb} requires a number, got {type_name(arg)}")
        value = float(arg)
        if math.isnan(value) or math.isinf(value):
            return format_double(value)
        digits = 6 if precision is None else precision
        text = f"{value:.{digits}{verb}}"
        if verb == "e":
            mantissa, exp = text.split("e")
            text = f"{mantissa}e{exp[0]}{exp[1:].rjust(2, '0')}"
        return text
    if verb in "xXob":
        if t is int or t is UInt:
            n = int(arg)
            sign = "-" if n < 0 else ""
            body = format(abs(n), verb)
            return sign + body
        if t is str or t is bytes:
            if verb not in "xX":
                raise CelRuntimeError(f"format: %{verb} requires an integer")
            data: bytes = arg.encode() if t is str else bytes(arg)
            return data.hex() if verb == "x" else data.hex().upper()
        raise CelRuntimeError(f"format: %{verb} requires an integer, got {type_name(arg)}")
    raise CelRuntimeError(f"format: unrecognized formatting clause %{verb}")


_def("format", ("string", "list"), "string", _format, cost=_str_cost)


# --------------------------------------------------------------------- regex (k8s)
def _find(s: str, pattern: str) -> str:
    return compile_regex(pattern).find(s)


def _find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = compile_regex(pattern).find_all(s)
    return found[:limit] if limit > 0 else found


_def("find", ("string", "string"), "string", _find, cost=_str_cost)
_def("findAll", ("string", "string"), "list", _find_all, cost=_str_cost)
_def("findAll", ("string", "string", "int"), "list", _find_all, cost=_str_cost)


# --------------------------------------------------------------------- lists (k8s)
def _require_comparable(items: list[Any], what: str) -> None:
    if not items:
        return
    first = type(items[0])
    numeric = {int, UInt, float}
    for x in items:
        if type(x) is not first and not (first in numeric and type(x) in numeric):
            raise CelRuntimeError(f"{what}: list elements must have the same comparable type")
    if first not in numeric and first not in (str, bytes, bool, Version, Quantity):
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


_def("isSorted", ("list",), "bool", _is_sorted, cost=_list_cost)
_def("sum", ("list",), DYN, _sum, cost=_list_cost)
_def("min", ("list",), DYN, _min, cost=_list_cost)
_def("max", ("list",), DYN, _max, cost=_list_cost)
_def("indexOf", ("list", DYN), "int", _list_index_of, cost=_list_cost)
_def("lastIndexOf", ("list", DYN), "int", _list_last_index_of, cost=_list_cost)


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


_def("slice", ("list", "int", "int"), "list", _slice, cost=_list_cost)
_def("flatten", ("list",), "list", _flatten, cost=_list_cost)
_def("flatten", ("list", "int"), "list", _flatten, cost=_list_cost)
_def("lists.range", ("int",), "list", _range, receiver=False, cost=lambda n: 1 + max(n, 0))
_def("distinct", ("list",), "list", _distinct, cost=lambda x: 1 + len(x) * len(x))
_def("reverse", ("list",), "list", _reverse, cost=_list_cost)
_def("sort", ("list",), "list", _sort, cost=_list_cost)
_def("first", ("list",), OPTIONAL, _first)
_def("last", ("list",), OPTIONAL, _last)


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
    _def(_name, ("list", "list"), "bool", _impl, receiver=False, cost=_pair_cost)


# --------------------------------------------------------------------- conversions
_GO_TRUE: Final = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_GO_FALSE: Final = frozenset(("0", "f", "F", "FALSE", "false", "False"))
_INT_TEXT: Final = re.compile(r"[+-]?\d+")
_FLOAT_TEXT: Final = re.compile(
    r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|[iI]nf(?:inity)?|NaN|nan)"
)


def _to_int(value: Any) -> int:
    t = type(value)
    if t is int:
        return int(value)
    if t is UInt:
        return check_int(int(value))
    if t is float:
        if math.isnan(value) or not (-(2.0**63) <= value < 2.0**63):
            raise CelRuntimeError("integer overflow")
        return int(value)
    if t is str:
        if not _INT_TEXT.fullmatch(value):
            raise CelRuntimeError(f"cannot convert {value!r} to int")
        return check_int(int(value))
    raise CelRuntimeError(f"no such overload: int({type_name(value)})")


def _to_uint(value: Any) -> UInt:
    t = type(value)
    if t is UInt:
        return UInt(value)
    if t is int:
        if value < 0:
            raise CelRuntimeError("unsigned integer overflow")
        return UInt(value)
    if t is float:
        if math.isnan(value) or not (0 <= value < 2.0**64):
            raise CelRuntimeError("unsigned integer overflow")
        return UInt(int(value))
    if t is str:
        if not value.isdigit() or not value.isascii():
            raise CelRuntimeError(f"cannot convert {value!r} to uint")
        n = int(value)
        if n > UINT64_MAX:
            raise CelRuntimeError("unsigned integer overflow")
        return UInt(n)
    raise CelRuntimeError(f"no such overload: uint({type_name(value)})")


def _to_double(value: Any) -> float:
    t = type(value)
    if t is float or t is int or t is UInt:
        return float(value)
    if t is str:
        if not _FLOAT_TEXT.fullmatch(value):
            raise CelRuntimeError(f"cannot convert {value!r} to double")
        return float(value)
    raise CelRuntimeError(f"no such overload: double({type_name(value)})")


def _to_string(value: Any) -> str:
    t = type(value)
    if t is bytes:
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise CelRuntimeError("invalid UTF-8 in bytes, cannot convert to string") from None
    if t in (str, bool, int, UInt, float, Version, Quantity):
        return format_value(value)
    raise CelRuntimeError(f"no such overload: string({type_name(value)})")


def _to_bool(value: Any) -> bool:
    if type(value) is bool:
        return bool(value)
    if type(value) is str:
        if value in _GO_TRUE:
            return True
        if value in _GO_FALSE:
            return False
        raise CelRuntimeError(f"cannot convert {value!r} to bool")
    raise CelRuntimeError(f"no such overload: bool({type_name(value)})")


def _to_bytes(value: Any) -> bytes:
    if type(value) is bytes:
        return bytes(value)
    if type(value) is str:
        return str(value).encode()
    raise CelRuntimeError(f"no such overload: bytes({type_name(value)})")


def _dyn(value: Any) -> Any:
    return value


def _type(value: Any) -> CelType:
    name = type_name(value)
    return TYPES.get(name) or CelType(name)


for _name, _impl, _result, _sources in (
    ("int", _to_int, "int", ("int", "uint", "double", "string")),
    ("uint", _to_uint, "uint", ("int", "uint", "double", "string")),
    ("double", _to_double, "double", ("int", "uint", "double", "string")),
    ("string", _to_string, "string", ("string", "int", "uint", "double", "bool", "bytes")),
    ("bool", _to_bool, "bool", ("bool", "string")),
    ("bytes", _to_bytes, "bytes", ("bytes", "string")),
):
    for _source in _sources:
        _def(_name, (_source,), _result, _impl, receiver=False)
_def("dyn", (DYN,), DYN, _dyn, receiver=False)
_def("type", (DYN,), "type", _type, receiver=False)


# --------------------------------------------------------------------- quantity (k8s)
def _quantity(text: str) -> Quantity:
    try:
        return Quantity.parse(text)
    except ValueError as err:
        raise CelRuntimeError(f"invalid quantity {text!r}: {err}") from None


def _is_quantity(text: str) -> bool:
    try:
        Quantity.parse(text)
    except ValueError:
        return False
    return True


def _q_is_integer(q: Quantity) -> bool:
    try:
        q.as_int()
    except ValueError:
        return False
    return True


def _q_as_integer(q: Quantity) -> int:
    try:
        return q.as_int()
    except ValueError:
        raise CelRuntimeError(
            "cannot convert value to integer: quantity is fractional or overflows int64"
        ) from None


def _q_add(q: Quantity, other: Quantity | int) -> Quantity:
    if isinstance(other, int):
        return q + Quantity(other)
    return q + other


def _q_sub(q: Quantity, other: Quantity | int) -> Quantity:
    if isinstance(other, int):
        return q - Quantity(other)
    return q - other


def quantity_compare(a: Quantity, b: Quantity) -> int:
    """-1, 0 or 1; integral values (the common case) skip Fraction arithmetic."""
    x = a.as_fraction()
    y = b.as_fraction()
    if x.denominator == 1 and y.denominator == 1:
        p, q = x.numerator, y.numerator
        return (p > q) - (p < q)
    return (x > y) - (x < y)


_def("quantity", ("string",), QUANTITY, _quantity, receiver=False)
_def("isQuantity", ("string",), "bool", _is_quantity, receiver=False)
_def("sign", (QUANTITY,), "int", lambda q: q.sign())
_def("isInteger", (QUANTITY,), "bool", _q_is_integer)
_def("asInteger", (QUANTITY,), "int", _q_as_integer)
_def("asApproximateFloat", (QUANTITY,), "double", lambda q: q.as_approximate_float())
_def("add", (QUANTITY, QUANTITY), QUANTITY, _q_add)
_def("add", (QUANTITY, "int"), QUANTITY, _q_add)
_def("sub", (QUANTITY, QUANTITY), QUANTITY, _q_sub)
_def("sub", (QUANTITY, "int"), QUANTITY, _q_sub)
_def("isGreaterThan", (QUANTITY, QUANTITY), "bool", lambda a, b: quantity_compare(a, b) > 0)
_def("isLessThan", (QUANTITY, QUANTITY), "bool", lambda a, b: quantity_compare(a, b) < 0)
_def("compareTo", (QUANTITY, QUANTITY), "int", quantity_compare)


# --------------------------------------------------------------------- semver (k8s, v1)
_NORMALIZE_RE: Final = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$")


def _normalize_semver(text: str) -> str:
    # SemverVersion(1)'s normalize: drop a leading "v", fill in missing minor/patch and
    # strip leading zeros from the numbers.
    m = _NORMALIZE_RE.match(text)
    if m is None:
        return text
    major, minor, patch, rest = m.groups()
    parts = [str(int(x)) for x in (major, minor or "0", patch or "0")]
    return ".".join(parts) + rest


def _semver(text: str, normalize: bool = False) -> Version:
    try:
        return Version.parse(_normalize_semver(text) if normalize else text)
    except ValueError as err:
        raise CelRuntimeError(f"invalid semver {text!r}: {err}") from None


def _is_semver(text: str, normalize: bool = False) -> bool:
    try:
        Version.parse(_normalize_semver(text) if normalize else text)
    except ValueError:
        return False
    return True


_def("semver", ("string",), SEMVER, _semver, receiver=False)
_def("semver", ("string", "bool"), SEMVER, _semver, receiver=False)
_def("isSemver", ("string",), "bool", _is_semver, receiver=False)
_def("isSemver", ("string", "bool"), "bool", _is_semver, receiver=False)
_def("major", (SEMVER,), "int", lambda v: v.major)
_def("minor", (SEMVER,), "int", lambda v: v.minor)
_def("patch", (SEMVER,), "int", lambda v: v.patch)
_def("isGreaterThan", (SEMVER, SEMVER), "bool", lambda a, b: a.compare(b) > 0)
_def("isLessThan", (SEMVER, SEMVER), "bool", lambda a, b: a.compare(b) < 0)
_def("compareTo", (SEMVER, SEMVER), "int", lambda a, b: a.compare(b))


# --------------------------------------------------------------------- optionals
def _zero(value: Any) -> bool:
    t = type(value)
    if t in (list, str, bytes) or isinstance(value, dict):
        return len(value) == 0
    if value is None:
        return True
    if t in (bool, int, UInt, float):
        return not value
    return False


def _opt_value(opt: Optional) -> Any:
    if not opt.has_value:
        raise CelRuntimeError("optional.none() dereference")
    return opt.value


_def("optional.of", (DYN,), OPTIONAL, Optional, receiver=False)
_def("optional.none", (), OPTIONAL, lambda: NONE, receiver=False)
_def(
    "optional.ofNonZeroValue",
    (DYN,),
    OPTIONAL,
    lambda v: NONE if _zero(v) else Optional(v),
    receiver=False,
)
_def("hasValue", (OPTIONAL,), "bool", lambda o: o.has_value)
_def("value", (OPTIONAL,), DYN, _opt_value)
_def("orValue", (OPTIONAL, DYN), DYN, lambda o, d: o.value if o.has_value else d)


def _opt_or(a: Optional, b: Any) -> Optional:
    if a.has_value:
        return a
    if type(b) is not Optional:
        raise CelRuntimeError(f"no such overload: or(optional_type, {type_name(b)})")
    return b


_def("or", (OPTIONAL, OPTIONAL), OPTIONAL, _opt_or)

TYPE_IDENTS: Final[dict[str, CelType]] = dict(TYPES)
