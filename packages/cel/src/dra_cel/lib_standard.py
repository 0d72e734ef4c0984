"""CEL standard functions: size, string tests, regex ``matches``, type conversions,
``dyn``/``type`` and optional values."""

from __future__ import annotations

import math
import re
from typing import Any, Final

from dra_api_types import Quantity, Version

from .errors import CelRuntimeError
from .overloads import DYN, OPTIONAL, define, str_cost
from .regex import compile_regex
from .syntax import UINT64_MAX, UInt
from .values import NONE, TYPES, CelType, Optional, check_int, type_name


# --------------------------------------------------------------------- size
def _size(value: Any) -> int:
    return len(value)


for _t in ("string", "bytes", "list", "map"):
    define("size", (_t,), "int", _size, receiver=False)
    define("size", (_t,), "int", _size)


# --------------------------------------------------------------------- strings
def _contains(s: str, sub: str) -> bool:
    return sub in s


def _starts_with(s: str, prefix: str) -> bool:
    return s.startswith(prefix)


def _ends_with(s: str, suffix: str) -> bool:
    return s.endswith(suffix)


def _matches(s: str, pattern: str) -> bool:
    return compile_regex(pattern).search(s)


define("contains", ("string", "string"), "bool", _contains, cost=str_cost)
define("startsWith", ("string", "string"), "bool", _starts_with, cost=str_cost)
define("endsWith", ("string", "string"), "bool", _ends_with, cost=str_cost)
define("matches", ("string", "string"), "bool", _matches, cost=str_cost)
define("matches", ("string", "string"), "bool", _matches, receiver=False, cost=str_cost)


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
        define(_name, (_source,), _result, _impl, receiver=False)
define("dyn", (DYN,), DYN, _dyn, receiver=False)
define("type", (DYN,), "type", _type, receiver=False)


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


define("optional.of", (DYN,), OPTIONAL, Optional, receiver=False)
define("optional.none", (), OPTIONAL, lambda: NONE, receiver=False)
define(
    "optional.ofNonZeroValue",
    (DYN,),
    OPTIONAL,
    lambda v: NONE if _zero(v) else Optional(v),
    receiver=False,
)
define("hasValue", (OPTIONAL,), "bool", lambda o: o.has_value)
define("value", (OPTIONAL,), DYN, _opt_value)
define("orValue", (OPTIONAL, DYN), DYN, lambda o, d: o.value if o.has_value else d)


def _opt_or(a: Optional, b: Any) -> Optional:
    if a.has_value:
        return a
    if type(b) is not Optional:
        raise CelRuntimeError(f"no such overload: or(optional_type, {type_name(b)})")
    return b


define("or", (OPTIONAL, OPTIONAL), OPTIONAL, _opt_or)
