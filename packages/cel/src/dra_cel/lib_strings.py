"""``ext.Strings`` (version 2) and the Kubernetes regex library (``find``, ``findAll``)."""

from __future__ import annotations

import math
import re
from typing import Any, Final

from .errors import CelRuntimeError
from .lib_standard import format_double, format_value
from .overloads import define, list_cost, str_cost
from .regex import compile_regex
from .syntax import UInt
from .values import type_name


def _check_index(s: str, index: int, what: str = "index") -> None:
    if index < 0 or index > len(s):
        raise CelRuntimeError(f"{what} out of range: {index}")


def _char_at(s: str, index: int) -> str:
    _check_index(s, index)
    return s[index] if index < len(s) else ""


def _index_of(s: str, sub: str, start: int = 0) -> int:
    # A negative offset is an error; one past the end simply finds nothing.
    if start < 0:
        raise CelRuntimeError(f"index out of range: {start}")
    if start > len(s):
        return -1
    return s.find(sub, start)


def _last_index_of(s: str, sub: str, end: int | None = None) -> int:
    if end is None:
        return s.rfind(sub)
    if end < 0:
        raise CelRuntimeError(f"index out of range: {end}")
    if end > len(s):
        return -1
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

define("charAt", ("string", "int"), "string", _char_at)
define("indexOf", ("string", "string"), "int", _index_of, cost=str_cost)
define("indexOf", ("string", "string", "int"), "int", _index_of, cost=str_cost)
define("lastIndexOf", ("string", "string"), "int", _last_index_of, cost=str_cost)
define("lastIndexOf", ("string", "string", "int"), "int", _last_index_of, cost=str_cost)
define("lowerAscii", ("string",), "string", _lower_ascii, cost=str_cost)
define("upperAscii", ("string",), "string", _upper_ascii, cost=str_cost)
define("replace", ("string", "string", "string"), "string", _replace, cost=str_cost)
define("replace", ("string", "string", "string", "int"), "string", _replace, cost=str_cost)
define("split", ("string", "string"), "list", _split, cost=str_cost)
define("split", ("string", "string", "int"), "list", _split, cost=str_cost)
define("substring", ("string", "int"), "string", _substring, cost=str_cost)
define("substring", ("string", "int", "int"), "string", _substring, cost=str_cost)
define("trim", ("string",), "string", _trim, cost=str_cost)
define("join", ("list",), "string", _join, cost=list_cost)
define("join", ("list", "string"), "string", _join, cost=list_cost)
define("strings.quote", ("string",), "string", _quote, receiver=False, cost=str_cost)


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


define("format", ("string", "list"), "string", _format, cost=str_cost)


# --------------------------------------------------------------------- regex (k8s)
def _find(s: str, pattern: str) -> str:
    return compile_regex(pattern).find(s)


def _find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = compile_regex(pattern).find_all(s)
    return found[:limit] if limit > 0 else found


define("find", ("string", "string"), "string", _find, cost=str_cost)
define("findAll", ("string", "string"), "list", _find_all, cost=str_cost)
define("findAll", ("string", "string", "int"), "list", _find_all, cost=str_cost)
