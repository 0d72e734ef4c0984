"""Mapping a classic time-slice duration (``interval: "5ms"``) to a GpuConfig interval name.

NVIDIA's driver only sets named levels (``nvidia-smi compute-policy --set-timeslice
0..3``) and publishes their order, not their lengths. The nominal lengths below are this
tool's assumption, stated in every note so users can pick another level by hand.
"""

from __future__ import annotations

import math
import re
from typing import Final

from dra_api_types.nvidia_v1beta1 import TIME_SLICE_INTERVALS

#: Assumed nominal slice length of each level, in microseconds (shortest first).
NOMINAL_US: Final = {"Short": 1000.0, "Default": 2000.0, "Medium": 5000.0, "Long": 10000.0}

_UNITS_US: Final = {"ns": 0.001, "us": 1.0, "µs": 1.0, "ms": 1000.0, "s": 1_000_000.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s)")


class DurationError(ValueError):
    """A string is not a Go duration (``5ms``, ``1.5ms``, ``500us``)."""


def parse_duration_us(text: str) -> float:
    """A Go-style duration in microseconds; raises :class:`DurationError`."""
    pos, total = 0, 0.0
    stripped = text.strip()
    if not stripped:
        raise DurationError("empty duration")
    while pos < len(stripped):
        match = _PART.match(stripped, pos)
        if match is None:
            raise DurationError(f"{text!r} is not a duration like '5ms'")
        total += float(match.group(1)) * _UNITS_US[match.group(2)]
        pos = match.end()
    if total <= 0:
        raise DurationError(f"{text!r} must be longer than zero")
    return total


def nearest_interval(text: str) -> tuple[str, str]:
    """The interval name for a legacy interval, and why (for the note).

    A name (``Short``...) is kept; a duration picks the level whose nominal length is
    nearest on a log scale (slice lengths matter by ratio), ties to the shorter one.
    """
    if text in TIME_SLICE_INTERVALS:
        return text, f"interval {text!r} is already a level name"
    us = parse_duration_us(text)
    name = min(NOMINAL_US, key=lambda n: (abs(math.log(us / NOMINAL_US[n])), NOMINAL_US[n]))
    levels = ", ".join(f"{n} ~{NOMINAL_US[n] / 1000:g}ms" for n in NOMINAL_US)
    why = (
        f"interval {text!r} -> {name}: the driver sets only named levels; {name} is the "
        f"nearest (assumed nominal lengths: {levels}; NVIDIA publishes only their order)"
    )
    return name, why
