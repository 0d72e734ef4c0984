"""Kubernetes ``resource.Quantity``: exact parsing, arithmetic and canonical formatting.

The semantics follow k8s.io/apimachinery/pkg/api/resource:

* values are exact (a :class:`fractions.Fraction`), rounded *up* (away from zero) to a
  multiple of 1n when parsed, as the apiserver does;
* binary-suffixed values (``Ki``..``Ei``) larger than 2^63-1 are capped at 2^63-1;
* ``str(q)`` is what Go's ``Quantity.String()`` returns: the parsed string itself when it
  already was canonical, otherwise the canonical form (largest suffix of the value's format
  that keeps an integer mantissa; ``1.5Gi`` -> ``1536Mi``, ``0.1`` -> ``100m``,
  ``1000m`` -> ``1``; ``1e3`` stays ``1e3`` because exponent notation is its own format);
* ``+``/``-`` keep the format of the left operand (or of the right one when the left is 0).

One deliberate difference: Go prints decimal-SI values of 10^21 and above without a suffix
(losing the exponent); here they are printed with the ``E`` suffix so that
``Quantity.parse(str(q)) == q`` always holds.
"""

from __future__ import annotations

import functools
import math
import re
from enum import StrEnum
from fractions import Fraction
from typing import Any, Final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from .errors import QuantityError

__all__ = ["Amount", "Quantity", "QuantityFormat", "QuantityIdentity", "parsed_identity"]

# An exact amount as arithmetic wants it: a plain int when whole (fast), a Fraction otherwise.
Amount = int | Fraction

_INT64_MAX: Final = (1 << 63) - 1
_INT64_MIN: Final = -(1 << 63)
_NANO: Final = Fraction(1, 10**9)
# Beyond this a decimal exponent cannot be a resource amount; refusing it keeps parsing
# bounded (Go would build an arbitrarily large number).
_MAX_EXPONENT: Final = 4096
_MAX_DIGITS: Final = 4000

_DIGITS: Final = frozenset("0123456789")
_SUFFIX_CHARS: Final = frozenset("eEinumkKMGTP")


class QuantityFormat(StrEnum):
    """The three formats of a quantity; the canonical form depends on it."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


_DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: Final[dict[str, int]] = {
    "Ki": 10,
    "Mi": 20,
    "Gi": 30,
    "Ti": 40,
    "Pi": 50,
    "Ei": 60,
}
_DECIMAL_BY_EXPONENT: Final = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER: Final = {v // 10: k for k, v in _BINARY_SUFFIXES.items()}


class _Split:
    __slots__ = ("denom", "num", "positive", "suffix")

    def __init__(self, positive: bool, num: str, denom: str, suffix: str) -> None:
        self.positive = positive
        self.num = num
        self.denom = denom
        self.suffix = suffix


def _split(text: str) -> _Split:
    """Split ``text`` into sign, integer digits, fraction digits and suffix.

    Mirrors the scanner of the Go implementation, including its tolerance for a missing
    integer part (``.5``) or fraction part (``1.``).
    """
    end = len(text)
    pos = 0
    positive = True
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return _Split(positive, "0", "", "")
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise QuantityError(
            f"quantity {text!r} must match the regular expression "
            r"'^([+-]?[0-9.]+)([eEinumkMGTP]*[-+]?[0-9]*)$'"
        )
    return _Split(positive, num, denom, text[suffix_start:])


def _interpret(suffix: str, text: str) -> tuple[int, int, QuantityFormat]:
    """Return (base, exponent, format) of a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], QuantityFormat.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and all(c in _DIGITS for c in body):
            exponent = int(digits)
            if abs(exponent) > _MAX_EXPONENT:
                raise QuantityError(f"quantity {text!r}: exponent {exponent} is out of range")
            return 10, exponent, QuantityFormat.DECIMAL_EXPONENT
    raise QuantityError(f"quantity {text!r}: unable to parse quantity's suffix {suffix!r}")


def _round_up_to_nano(value: Fraction) -> Fraction:
    """Round away from zero to a multiple of 1n."""
    scaled = value / _NANO
    if scaled.denominator == 1:
        return value
    magnitude = math.ceil(abs(scaled))
    return Fraction(magnitude if value > 0 else -magnitude, 10**9)


class Quantity:
    """An exact Kubernetes resource quantity (``500m``, ``1536Mi``, ``1e3``, ``80Gi``).

    Immutable and hashable; equality and ordering are by numeric value, so
    ``Quantity.parse("1Gi") == Quantity.parse("1024Mi")``.
    """

    __slots__ = ("_format", "_string", "_value")

    _value: Fraction
    _format: QuantityFormat
    _string: str | None

    def __init__(
        self,
        value: int | Fraction = 0,
        fmt: QuantityFormat = QuantityFormat.DECIMAL_SI,
    ) -> None:
        """Build a quantity from an exact number (rounded up to 1n) in a given format."""
        if isinstance(value, bool) or not isinstance(value, int | Fraction):
            raise TypeError(f"Quantity value must be int or Fraction, not {type(value).__name__}")
        self._value = _round_up_to_nano(Fraction(value))
        self._format = QuantityFormat(fmt)
        self._string = None

    # ------------------------------------------------------------------ parsing
    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Parse a quantity string exactly as the Kubernetes apiserver does.

        Raises :class:`~dra_api_types.errors.QuantityError` (a ``ValueError``) on bad input.
        """
        if not isinstance(text, str):
            raise QuantityError(f"quantity must be a string, not {type(text).__name__}")
        # A subclass (none in this codebase) parses afresh, into its own type.
        return _parse_memo(text) if cls is Quantity else cls._parse_text(text)

    @classmethod
    def _parse_text(cls, text: str) -> Quantity:
        """:meth:`parse` itself, without the memo."""
        if text == "":
            raise QuantityError("quantity must not be empty")
        if text == "0":
            return cls._make(Fraction(0), QuantityFormat.DECIMAL_SI, "0")
        parts = _split(text)
        if len(parts.num) + len(parts.denom) > _MAX_DIGITS:
            raise QuantityError(f"quantity {text[:32]!r}...: more than {_MAX_DIGITS} digits")
        base, exponent, fmt = _interpret(parts.suffix, text)
        magnitude = Fraction(int(parts.num + parts.denom), 10 ** len(parts.denom))
        scale = Fraction(10) ** exponent if base == 10 else Fraction(1 << exponent)
        amount = magnitude * scale
        if not parts.positive:
            amount = -amount
        cached = cls._cached_string(text, parts, fmt, exponent)
        if cached is not None:
            return cls._make(amount, fmt, cached)
        amount = _round_up_to_nano(amount)
        if fmt is QuantityFormat.BINARY_SI:
            if abs(amount) > _INT64_MAX:
                amount = Fraction(_INT64_MAX if amount > 0 else -_INT64_MAX)
            if 0 < abs(amount) < 1:
                fmt = QuantityFormat.DECIMAL_SI
        return cls._make(Fraction(amount), fmt, None)

    @staticmethod
    def _cached_string(text: str, parts: _Split, fmt: QuantityFormat, exponent: int) -> str | None:
        """Return ``text`` when Go would keep it verbatim as the quantity's string.

        Go keeps the input string when it takes its int64 fast path and the input already
        looks canonical; it must be reproduced exactly because it is what the apiserver
        writes back.
        """
        shifted = parts.num + parts.denom
        if fmt is QuantityFormat.BINARY_SI:
            if parts.denom or exponent < 0:
                return None
            precision = 15 - len(parts.num) - int(exponent * 3 / 10) - 1
            if precision < 0:
                return None
            value = int(shifted)
            if value > _INT64_MAX or value * (1 << exponent) > _INT64_MAX:
                return None
            if exponent % 10 == 0 and value & 0x07 != 0:
                return text
            return None
        precision = 18 - (len(parts.num) + len(parts.denom))
        scale = exponent - len(parts.denom)
        if precision < 0 or scale < -9:
            return None
        value = int(shifted)
        if value > _INT64_MAX:
            return None
        if scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
            return text
        return None

    @classmethod
    def _make(cls, value: Fraction, fmt: QuantityFormat, string: str | None) -> Quantity:
        q = object.__new__(cls)
        q._value = value
        q._format = fmt
        q._string = string
        return q

    @classmethod
    def from_int(cls, value: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> Quantity:
        """A whole-number quantity (``from_int(2 << 30, QuantityFormat.BINARY_SI)`` is 2Gi)."""
        return cls(value, fmt)

    @classmethod
    def from_milli(cls, value: int, fmt: QuantityFormat = QuantityFormat.DECIMAL_SI) -> Quantity:
        """A quantity of ``value`` thousandths (``from_milli(1500)`` is 1500m)."""
        return cls(Fraction(value, 1000), fmt)

    @classmethod
    def coerce(cls, value: object) -> Quantity:
        """Accept a Quantity, a string, an int or a float as the apiserver's JSON decoder does."""
        if isinstance(value, Quantity):
            return value
        if isinstance(value, bool):
            raise QuantityError("quantity must be a string or a number, not a boolean")
        if isinstance(value, int):
            return cls.parse(str(value))
        if isinstance(value, float):
            if not math.isfinite(value):
                raise QuantityError(f"quantity {value!r} is not a finite number")
            return cls.parse(repr(value))
        if isinstance(value, str):
            # The apiserver's JSON decoder trims surrounding white space.
            return cls.parse(value.strip())
        raise QuantityError(f"quantity must be a string or a number, not {type(value).__name__}")

    # ------------------------------------------------------------------ properties
    @property
    def value(self) -> Fraction:
        """The exact numeric value."""
        return self._value

    @property
    def format(self) -> QuantityFormat:
        """The format the canonical string is written in."""
        return self._format

    def sign(self) -> int:
        """-1, 0 or 1."""
        return (self._value > 0) - (self._value < 0)

    def is_zero(self) -> bool:
        """True when the value is 0."""
        return self._value == 0

    def is_integer(self) -> bool:
        """True when the value is a whole number."""
        return self._value.denominator == 1

    def as_int(self) -> int:
        """The value as an int; ValueError if it is fractional or outside int64."""
        if self._value.denominator != 1:
            raise ValueError(f"quantity {self} is not an integer")
        number = self._value.numerator
        if not _INT64_MIN <= number <= _INT64_MAX:
            raise ValueError(f"quantity {self} does not fit in an int64")
        return number

    def value_ceil(self) -> int:
        """The value rounded up away from zero, as Go's ``Quantity.Value()``."""
        return _ceil_away(self._value)

    def milli_value(self) -> int:
        """ceil(value * 1000), rounded away from zero, as Go's ``MilliValue()``."""
        return _ceil_away(self._value * 1000)

    def as_approximate_float(self) -> float:
        """The value as a float (may lose precision)."""
        return float(self._value)

    def as_fraction(self) -> Fraction:
        """The exact value."""
        return self._value

    def amount(self) -> Amount:
        """The exact value as an int when whole, else a Fraction (cheap to add and compare)."""
        value = self._value
        return value.numerator if value.denominator == 1 else value

    # ------------------------------------------------------------------ formatting
    def __str__(self) -> str:
        if self._string is None:
            self._string = self.canonical()
        return self._string

    def canonical(self) -> str:
        """The canonical form, even if the quantity was parsed from a non-canonical string."""
        value = self._value
        if value == 0:
            return "0"
        fmt = self._format
        if fmt is QuantityFormat.BINARY_SI:
            if -1024 < value < 1024 or value.denominator != 1:
                fmt = QuantityFormat.DECIMAL_SI
            else:
                number = value.numerator
                power = 0
                while abs(number) >= 1024 and number % 1024 == 0 and power < 6:
                    number //= 1024
                    power += 1
                return f"{number}{_BINARY_BY_POWER.get(power, '')}"
        mantissa, exponent = _decimal_mantissa(value)
        shift = exponent % 3
        mantissa *= 10**shift
        exponent -= shift
        if fmt is QuantityFormat.DECIMAL_EXPONENT:
            return f"{mantissa}" if exponent == 0 else f"{mantissa}e{exponent}"
        if exponent > 18:
            mantissa *= 10 ** (exponent - 18)
            exponent = 18
        return f"{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"

    # ------------------------------------------------------------------ comparison
    def __hash__(self) -> int:
        return hash(self._value)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value == other._value
        return NotImplemented

    def __lt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._value < other._value

    def __le__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._value <= other._value

    def __gt__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._value > other._value

    def __ge__(self, other: Quantity) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self._value >= other._value

    def cmp(self, other: Quantity) -> int:
        """-1, 0 or 1 as Go's ``Cmp``."""
        return (self._value > other._value) - (self._value < other._value)

    # ------------------------------------------------------------------ arithmetic
    def _result_format(self, other: Quantity) -> QuantityFormat:
        return other._format if self._value == 0 else self._format

    def __add__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity._make(self._value + other._value, self._result_format(other), None)

    def __sub__(self, other: Quantity) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return Quantity._make(self._value - other._value, self._result_format(other), None)

    def __neg__(self) -> Quantity:
        return Quantity._make(-self._value, self._format, None)

    def __abs__(self) -> Quantity:
        return Quantity._make(abs(self._value), self._format, None)

    def __mul__(self, factor: int) -> Quantity:
        if isinstance(factor, bool) or not isinstance(factor, int):
            return NotImplemented
        return Quantity._make(self._value * factor, self._format, None)

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return self._value != 0

    # ------------------------------------------------------------------ pydantic
    @classmethod
    def __get_pydantic_core_schema__(
        cls, source_type: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _validate_quantity,
            serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="always"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
            "pattern": QUANTITY_PATTERN,
        }


QUANTITY_PATTERN: Final = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)


def _validate_quantity(value: object) -> Quantity:
    try:
        return Quantity.coerce(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None


def _ceil_away(value: Fraction) -> int:
    if value >= 0:
        return math.ceil(value)
    return -math.ceil(-value)


def _decimal_mantissa(value: Fraction) -> tuple[int, int]:
    """Write a nano-multiple as mantissa * 10**exponent with no trailing zeros in mantissa."""
    exponent = 0
    while value.denominator != 1:
        value *= 10
        exponent -= 1
    number = value.numerator
    while number % 10 == 0:
        number //= 10
        exponent += 1
    return number, exponent


# resource.Quantity as Go compares it with ==: (int64 amount, its scale, the cached string,
# format); None for the arbitrary-precision form, which never compares equal to a copy.
QuantityIdentity = tuple[int, int, str, str] | None
_IDENTITY_PATTERN: Final = re.compile(r"^([+-]?)(\d*)(?:\.(\d*))?(.*)$")


@functools.lru_cache(maxsize=4096)
def _parse_memo(text: str) -> Quantity:
    """:meth:`Quantity.parse`, remembered. A quantity is an immutable value (its lazily kept
    string is a function of it), so one instance can serve every parse of a string; and a
    cluster's objects repeat a handful of strings (each device's capacities) many thousand
    times: ``kubectl dra explain`` on 1,000 nodes parsed 78,000, at ~45 us each through
    ``Fraction`` arithmetic."""
    return Quantity._parse_text(text)


@functools.lru_cache(maxsize=4096)
def parsed_identity(raw: str) -> QuantityIdentity:
    """What ``ParseQuantity(raw)`` holds, as far as Go's ``==`` on Quantity sees it.

    The allocator's request-policy check skips a value that ``== policy.default``; the parsed
    default is compared with a copy, so the fast int64 form compares by amount, scale,
    cached string and format, and the inf.Dec form (e.g. ``1.5Gi``: a binary suffix on a
    fraction) is never equal.
    """
    text = raw.strip()
    if text == "0":
        return (0, 0, "0", QuantityFormat.DECIMAL_SI.value)
    match = _IDENTITY_PATTERN.match(text)
    if match is None:
        return None
    sign, whole, frac, suffix = match.groups()
    num = whole.lstrip("0") or "0"
    denom = frac or ""
    if suffix in _BINARY_SUFFIXES:
        exponent = _BINARY_SUFFIXES[suffix]
        if denom:
            return None
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        mantissa, scale, fmt = 1 << exponent, 0, QuantityFormat.BINARY_SI
    else:
        if suffix in _DECIMAL_SUFFIXES:
            exponent, fmt = _DECIMAL_SUFFIXES[suffix], QuantityFormat.DECIMAL_SI
        elif suffix[:1] in ("e", "E") and re.fullmatch(r"[+-]?\d+", suffix[1:]):
            exponent, fmt = int(suffix[1:]), QuantityFormat.DECIMAL_EXPONENT
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
    if fmt is QuantityFormat.BINARY_SI:
        cached = text if int(shifted) & 0x07 else ""
    else:
        canonical = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
        cached = text if canonical else ""
    return (result, scale, cached, fmt.value)
