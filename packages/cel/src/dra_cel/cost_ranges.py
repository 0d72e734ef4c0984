"""Saturating uint64 ranges: the arithmetic of CEL's compile-time cost estimate.

cel-go's checker keeps every size and cost as a ``[min, max]`` pair of uint64 that never
overflows (a sum or product past 2**64-1 is 2**64-1) and multiplies by fractional cost
factors in float64, rounding up. Python's float is the same IEEE double, so the same
operations give the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

U64_MAX: Final = 2**64 - 1
_TWO_TO_64: Final = math.ldexp(1.0, 64)


def add_u64(x: int, y: int) -> int:
    """``x + y``, saturated at 2**64-1."""
    return min(x + y, U64_MAX)


def mul_u64(x: int, y: int) -> int:
    """``x * y``, saturated at 2**64-1."""
    return min(x * y, U64_MAX)


def mul_factor(x: int, factor: float) -> int:
    """``ceil(x * factor)`` computed in float64, saturated like cel-go's."""
    xf = float(x)
    if xf > 0 and factor > 0 and xf > U64_MAX / factor:
        return U64_MAX
    product = math.ceil(xf * factor)
    if product >= _TWO_TO_64:
        return U64_MAX
    return int(product)


@dataclass(frozen=True, slots=True)
class Range:
    """A ``[lo, hi]`` estimate of a cost or of a size (string length, list or map entries)."""

    lo: int
    hi: int

    def __add__(self, other: Range) -> Range:
        return Range(add_u64(self.lo, other.lo), add_u64(self.hi, other.hi))

    def times(self, other: Range) -> Range:
        """The product, bound by bound."""
        return Range(mul_u64(self.lo, other.lo), mul_u64(self.hi, other.hi))

    def factor(self, factor: float) -> Range:
        """Each bound times a cost factor, rounded up."""
        return Range(mul_factor(self.lo, factor), mul_factor(self.hi, factor))

    def union(self, other: Range) -> Range:
        """The smallest range holding both."""
        return Range(min(self.lo, other.lo), max(self.hi, other.hi))


ZERO: Final = Range(0, 0)
ONE: Final = Range(1, 1)
UNKNOWN: Final = Range(0, U64_MAX)


def fixed(value: int) -> Range:
    """The range holding exactly ``value``."""
    return Range(value, value)


__all__ = [
    "ONE",
    "U64_MAX",
    "UNKNOWN",
    "ZERO",
    "Range",
    "add_u64",
    "fixed",
    "mul_factor",
    "mul_u64",
]
