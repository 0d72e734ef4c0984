"""Exact Kubernetes quantities as fractions, for counter and capacity arithmetic.

The allocator compares and sums quantities in its inner loop, so it works on
``fractions.Fraction`` values parsed once per device rather than on model objects.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from .errors import AllocationError

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_PATTERN = re.compile(
    r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$"
)
# Exact amounts: plain ints when integral (fast), fractions otherwise.
Amount = int | Fraction

_BINARY = [("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)]


def parse_quantity(value: object, *, where: str = "") -> Amount:
    """Parse a Kubernetes quantity (``"80Gi"``, ``"1.5"``, ``"2e3"``, ``7``) exactly."""
    if isinstance(value, bool):
        raise AllocationError(f"not a quantity: {value!r}", field=where)
    if isinstance(value, int):
        return value
    text = str(value).strip()
    match = _PATTERN.match(text)
    if match is None:
        raise AllocationError(f"not a quantity: {text!r}", field=where)
    sign, number, suffix, exponent = match.groups()
    result = Fraction(number)
    if exponent is not None:
        result *= Fraction(10) ** int(exponent)
    else:
        result *= _SUFFIXES[suffix or ""]
    if sign == "-":
        result = -result
    return result.numerator if result.denominator == 1 else result


def format_binary_quantity(value: Amount) -> str:
    """Canonical BinarySI form of an integral value, as ``resource.NewQuantity(v, BinarySI)``."""
    if isinstance(value, Fraction) and value.denominator != 1:
        return format_decimal_quantity(value)
    number = int(value)
    if number == 0:
        return "0"
    for suffix, factor in _BINARY:
        if number % factor == 0:
            return f"{number // factor}{suffix}"
    return str(number)


# Quantity formats, as resource.Quantity names them (the format a value was written in).
BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"
_INT64_MAX = 2**63 - 1


def quantity_format(raw: object) -> str:
    """The format ParseQuantity gives a written quantity: by its suffix."""
    text = str(raw).strip()
    if text.endswith(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei")):
        return BINARY_SI
    if "e" in text.lower() and not text.endswith("E"):
        return DECIMAL_EXPONENT
    return DECIMAL_SI


def milli_value(value: Amount) -> int | None:
    """``safeMilliValue``: the value in milli units if that is exact (and fits an int64)."""
    scaled = Fraction(value) * 1000
    if scaled.denominator != 1 or abs(scaled.numerator) > _INT64_MAX:
        return None
    return scaled.numerator


def format_decimal_quantity(value: Amount, *, exponent: bool = False) -> str:
    """Canonical DecimalSI form (``1500m``, ``15k``), or DecimalExponent (``15e3``)."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    value = Fraction(-value if value < 0 else value)
    if value.denominator == 1:
        number = value.numerator
        for suffix, power in (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)):
            if number % 10**power == 0:
                tail = f"e{power}" if exponent else suffix
                return f"{sign}{number // 10**power}{tail}"
        return f"{sign}{number}"
    for suffix, power in (("m", 3), ("u", 6), ("n", 9)):
        scaled = value * 10**power
        if scaled.denominator == 1:
            tail = f"e-{power}" if exponent else suffix
            return f"{sign}{scaled.numerator}{tail}"
    # Kubernetes rounds sub-nano values up to the next nano.
    scaled = value * 10**9
    return f"{sign}{-((-scaled.numerator) // scaled.denominator)}{'e-9' if exponent else 'n'}"


# resource.Quantity as Go compares it with ==: (int64 amount, its scale, the cached string,
# format); None for the arbitrary-precision form, which never compares equal to a copy.
QuantityIdentity = tuple[int, int, str, str] | None
_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_EXPONENTS.update({"P": 15, "E": 18})
_IDENTITY_PATTERN = re.compile(r"^([+-]?)(\d*)(?:\.(\d*))?(.*)$")


@functools.lru_cache(maxsize=4096)
def parsed_identity(raw: str) -> QuantityIdentity:
    """What ``ParseQuantity(raw)`` holds, as far as Go's ``==`` on Quantity sees it.

    Upstream's request-policy check skips a value that ``== policy.default``; the parsed
    default is compared with a copy, so the fast int64 form compares by amount, scale,
    cached string and format, and the inf.Dec form (e.g. ``1.5Gi``: a binary suffix on a
    fraction) is never equal.
    """
    text = raw.strip()
    if text == "0":
        return (0, 0, "0", DECIMAL_SI)
    match = _IDENTITY_PATTERN.match(text)
    if match is None:
        return None
    sign, whole, frac, suffix = match.groups()
    num = whole.lstrip("0") or "0"
    denom = frac or ""
    if suffix in _BINARY_EXPONENTS:
        exponent = _BINARY_EXPONENTS[suffix]
        if denom:
            return None
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        mantissa, scale, fmt = 1 << exponent, 0, BINARY_SI
    else:
        if suffix in _DECIMAL_EXPONENTS:
            exponent, fmt = _DECIMAL_EXPONENTS[suffix], DECIMAL_SI
        elif suffix[:1] in ("e", "E") and re.fullmatch(r"[+-]?\d+", suffix[1:]):
            exponent, fmt = int(suffix[1:]), DECIMAL_EXPONENT
        else:
            return None
        precision = 18 - len(num) - len(denom)
        mantissa, scale = 1, exponent - len(denom)
    if precision < 0 or scale < -9:
        return None
    shifted = num + denom
    result = int(shifted) * mantissa
    if result > _INT64_MAX:
        return None
    if sign == "-":
        result = -result
    if fmt == BINARY_SI:
        cached = text if int(shifted) & 0x07 else ""
    else:
        canonical = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
        cached = text if canonical else ""
    return (result, scale, cached, fmt)
