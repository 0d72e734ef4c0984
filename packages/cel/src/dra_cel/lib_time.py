"""CEL's timestamp and duration functions: constructors, conversions and getters."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .overloads import define
from .temporal import DURATION_TYPE, NANOS, TIMESTAMP_TYPE, Duration, Timestamp, zone

define("timestamp", ("string",), TIMESTAMP_TYPE, Timestamp.parse, receiver=False)
define("timestamp", ("int",), TIMESTAMP_TYPE, lambda s: Timestamp(s * NANOS), receiver=False)
define("timestamp", (TIMESTAMP_TYPE,), TIMESTAMP_TYPE, lambda t: t, receiver=False)
define("duration", ("string",), DURATION_TYPE, Duration.parse, receiver=False)
define("duration", (DURATION_TYPE,), DURATION_TYPE, lambda d: d, receiver=False)
define("string", (TIMESTAMP_TYPE,), "string", str, receiver=False)
define("string", (DURATION_TYPE,), "string", str, receiver=False)
define("int", (TIMESTAMP_TYPE,), "int", lambda t: t.seconds, receiver=False)


def _getter(name: str, part: Callable[[datetime], int]) -> None:
    def in_utc(ts: Timestamp) -> int:
        return part(ts.datetime_in(UTC))

    def in_zone(ts: Timestamp, zone_name: str) -> int:
        return part(ts.datetime_in(zone(zone_name)))

    define(name, (TIMESTAMP_TYPE,), "int", in_utc)
    define(name, (TIMESTAMP_TYPE, "string"), "int", in_zone)


_getter("getFullYear", lambda d: d.year)
_getter("getMonth", lambda d: d.month - 1)
_getter("getDate", lambda d: d.day)
_getter("getDayOfMonth", lambda d: d.day - 1)
_getter("getDayOfWeek", lambda d: (d.weekday() + 1) % 7)
_getter("getDayOfYear", lambda d: d.timetuple().tm_yday - 1)
_getter("getHours", lambda d: d.hour)
_getter("getMinutes", lambda d: d.minute)
_getter("getSeconds", lambda d: d.second)


def _timestamp_millis(ts: Timestamp, *_zone: Any) -> int:
    # Milliseconds within the second do not depend on the time zone.
    return (ts.ns % NANOS) // 1_000_000


define("getMilliseconds", (TIMESTAMP_TYPE,), "int", _timestamp_millis)
define("getMilliseconds", (TIMESTAMP_TYPE, "string"), "int", _timestamp_millis)


def _truncated(ns: int, unit: int) -> int:
    # Whole units, truncated toward zero like Go's integer division.
    whole = abs(ns) // unit
    return whole if ns >= 0 else -whole


define("getHours", (DURATION_TYPE,), "int", lambda d: _truncated(d.ns, 3600 * NANOS))
define("getMinutes", (DURATION_TYPE,), "int", lambda d: _truncated(d.ns, 60 * NANOS))
define("getSeconds", (DURATION_TYPE,), "int", lambda d: _truncated(d.ns, NANOS))
define("getMilliseconds", (DURATION_TYPE,), "int", lambda d: _truncated(d.ns, 1_000_000))
