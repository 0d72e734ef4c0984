"""CEL ``google.protobuf.Timestamp`` and ``google.protobuf.Duration`` values.

Both hold an exact count of nanoseconds. Parsing and printing follow Go, as cel-go
does: RFC 3339 timestamps between years 1 and 9999, ``time.ParseDuration`` syntax.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from fractions import Fraction
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import CelRuntimeError

TIMESTAMP_TYPE: Final = "google.protobuf.Timestamp"
DURATION_TYPE: Final = "google.protobuf.Duration"

NANOS: Final = 1_000_000_000
_MIN_SECONDS: Final = -62135596800  # 0001-01-01T00:00:00Z
_MAX_SECONDS: Final = 253402300799  # 9999-12-31T23:59:59Z
_MAX_DURATION_NS: Final = 2**63 - 1
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

_RFC3339: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})"
)
_DURATION_PART: Final = re.compile(r"(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NS: Final = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": NANOS,
    "m": 60 * NANOS,
    "h": 3600 * NANOS,
}


class Timestamp:
    """A point in time, nanoseconds since the Unix epoch (UTC)."""

    __slots__ = ("ns",)

    def __init__(self, ns: int) -> None:
        if not _MIN_SECONDS * NANOS <= ns <= _MAX_SECONDS * NANOS + NANOS - 1:
            raise CelRuntimeError("timestamp out of range")
        self.ns = ns

    @classmethod
    def parse(cls, text: str) -> Timestamp:
        """An RFC 3339 timestamp, as Go's ``time.Parse(time.RFC3339, text)``."""
        m = _RFC3339.fullmatch(text)
        if m is None:
            raise CelRuntimeError(f"timestamp parse error: {text!r} is not RFC 3339")
        year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
        fraction, zone = m.group(7), m.group(8)
        try:
            offset = timedelta(0)
            if zone != "Z":
                sign = -1 if zone[0] == "-" else 1
                offset = sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
            moment = datetime(year, month, day, hour, minute, second, tzinfo=timezone(offset))
        except ValueError as err:
            raise CelRuntimeError(f"timestamp parse error: {text!r}: {err}") from None
        seconds = (moment - _EPOCH) // timedelta(seconds=1)
        nanos = int(fraction[1:].ljust(9, "0")) if fraction else 0
        return cls(seconds * NANOS + nanos)

    @property
    def seconds(self) -> int:
        """Whole seconds since the epoch (floor)."""
        return self.ns // NANOS

    def datetime_in(self, zone: tzinfo) -> datetime:
        """This instant as an aware datetime in ``zone`` (microsecond precision)."""
        return (_EPOCH + timedelta(microseconds=self.ns // 1000)).astimezone(zone)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Timestamp) and other.ns == self.ns

    def __lt__(self, other: Timestamp) -> bool:
        return self.ns < other.ns

    def __gt__(self, other: Timestamp) -> bool:
        return self.ns > other.ns

    def __hash__(self) -> int:
        return hash(("ts", self.ns))

    def __str__(self) -> str:
        moment = _EPOCH + timedelta(seconds=self.seconds)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S")
        nanos = self.ns % NANOS
        if nanos:
            text += "." + f"{nanos:09d}".rstrip("0")
        return text + "Z"


class Duration:
    """A signed span of time in nanoseconds."""

    __slots__ = ("ns",)

    def __init__(self, ns: int) -> None:
        if abs(ns) > _MAX_DURATION_NS:
            raise CelRuntimeError("duration out of range")
        self.ns = ns

    @classmethod
    def parse(cls, text: str) -> Duration:
        """Go's ``time.ParseDuration`` syntax: ``1h30m``, ``-1.5s``, ``300ms``."""
        body = text
        sign = 1
        if body[:1] in "+-" and body:
            sign = -1 if body[0] == "-" else 1
            body = body[1:]
        if body == "0":
            return cls(0)
        if not body:
            raise CelRuntimeError(f"invalid duration {text!r}")
        total = Fraction(0)
        position = 0
        while position < len(body):
            m = _DURATION_PART.match(body, position)
            if m is None or (not m.group(1) and not m.group(2)):
                raise CelRuntimeError(f"invalid duration {text!r}")
            whole = int(m.group(1) or "0")
            fraction = Fraction(int(m.group(2)), 10 ** len(m.group(2))) if m.group(2) else 0
            total += (whole + fraction) * _UNIT_NS[m.group(3)]
            position = m.end()
        return cls(sign * int(total))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other.ns == self.ns

    def __lt__(self, other: Duration) -> bool:
        return self.ns < other.ns

    def __gt__(self, other: Duration) -> bool:
        return self.ns > other.ns

    def __hash__(self) -> int:
        return hash(("dur", self.ns))

    def __str__(self) -> str:
        # Protobuf JSON form, as cel-go prints durations: seconds with a fraction.
        sign = "-" if self.ns < 0 else ""
        whole, nanos = divmod(abs(self.ns), NANOS)
        fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
        return f"{sign}{whole}{fraction}s"


def zone(name: str) -> tzinfo:
    """An IANA time zone name or a fixed ``[+-]HH:MM`` offset."""
    fixed = re.fullmatch(r"([+-]?)(\d{2}):(\d{2})", name)
    if fixed:
        sign = -1 if fixed.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=int(fixed.group(2)), minutes=int(fixed.group(3))))
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CelRuntimeError(f"unknown time zone {name!r}") from None
