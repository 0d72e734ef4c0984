"""The Kubernetes quantity and semver (version 1) libraries."""

from __future__ import annotations

import re
from typing import Final

from dra_api_types import Quantity, Version

from .errors import CelRuntimeError
from .overloads import QUANTITY, SEMVER, define


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


define("quantity", ("string",), QUANTITY, _quantity, receiver=False)
define("isQuantity", ("string",), "bool", _is_quantity, receiver=False)
define("sign", (QUANTITY,), "int", lambda q: q.sign())
define("isInteger", (QUANTITY,), "bool", _q_is_integer)
define("asInteger", (QUANTITY,), "int", _q_as_integer)
define("asApproximateFloat", (QUANTITY,), "double", lambda q: q.as_approximate_float())
define("add", (QUANTITY, QUANTITY), QUANTITY, _q_add)
define("add", (QUANTITY, "int"), QUANTITY, _q_add)
define("sub", (QUANTITY, QUANTITY), QUANTITY, _q_sub)
define("sub", (QUANTITY, "int"), QUANTITY, _q_sub)
define("isGreaterThan", (QUANTITY, QUANTITY), "bool", lambda a, b: quantity_compare(a, b) > 0)
define("isLessThan", (QUANTITY, QUANTITY), "bool", lambda a, b: quantity_compare(a, b) < 0)
define("compareTo", (QUANTITY, QUANTITY), "int", quantity_compare)


# --------------------------------------------------------------------- semver (k8s, v1)
_NORMALIZE_RE: Final = re.compile(r"^[vV]?(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$")


def _normalize_semver(text: str) -> str:
    # SemverVersion(1)'s normalize: drop a leading "v" or "V", fill in missing minor/patch and
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


define("semver", ("string",), SEMVER, _semver, receiver=False)
define("semver", ("string", "bool"), SEMVER, _semver, receiver=False)
define("isSemver", ("string",), "bool", _is_semver, receiver=False)
define("isSemver", ("string", "bool"), "bool", _is_semver, receiver=False)
define("major", (SEMVER,), "int", lambda v: v.major)
define("minor", (SEMVER,), "int", lambda v: v.minor)
define("patch", (SEMVER,), "int", lambda v: v.patch)
define("isGreaterThan", (SEMVER, SEMVER), "bool", lambda a, b: a.compare(b) > 0)
define("isLessThan", (SEMVER, SEMVER), "bool", lambda a, b: a.compare(b) < 0)
define("compareTo", (SEMVER, SEMVER), "int", lambda a, b: a.compare(b))
