"""Exact Kubernetes quantities as fractions, for counter and capacity arithmetic.

The allocator compares and sums quantities in its inner loop, so it works on
``fractions.Fraction`` values parsed once per device rather than on model objects.
"""

from __future__ import annotations

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
        return _format_decimal(value)
    number = int(value)
    if number == 0:
        return "0"
    for suffix, factor in _BINARY:
        if number % factor == 0:
            return f"{number // factor}{suffix}"
    return str(number)


def _format_decimal(value: Fraction) -> str:
    for suffix, factor in (("", 1), ("m", 10**3), ("u", 10**6), ("n", 10**9)):
        scaled = value * factor
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    # Kubernetes rounds sub-nano values up to the next nano.
    scaled = value * 10**9
    return f"{-((-scaled.numerator) // scaled.denominator)}n"
