"""MIG profile names (``1g.5gb``, ``1g.5gb+me``) for GPU instance profiles NVML gives no name.

NVML's ``nvmlGpuInstanceProfileInfo_v2_t`` carries the name; the v1 record does not, and
neither do NVIDIA's go-nvml mock systems. The name is then built the way NVIDIA's tools
build it: compute slices, then the profile's memory rounded up to an eighth of the board
(memory slices come in eighths) and expressed in whole GB of the board, then a suffix for
the profile variant (NVML_GPU_INSTANCE_PROFILE_* index).
"""

from __future__ import annotations

import math

MIB = 1024 * 1024

# NVML_GPU_INSTANCE_PROFILE_* index -> suffix (nvml.h: REV1 adds the media engines, GFX
# graphics, NO_ME none of the media engines, ALL_ME all of them; REV2 is a size variant).
_SUFFIXES = {
    0x07: "+me",
    0x08: "+me",
    0x0A: "+gfx",
    0x0B: "+gfx",
    0x0C: "+gfx",
    0x0D: "-me",
    0x0E: "-me",
    0x0F: "+me.all",
    0x10: "+me.all",
    0x11: "+gfx",
}
MEMORY_FRACTIONS = 8
# A profile a little over an eighth still counts as that eighth: real parts report a bit
# less than an eighth (A100 1g.5gb: 4864 of 40960 MiB), go-nvml's mock systems nominal sizes
# a bit more (H200 1g.18gb: 18432 of 144384 MiB).
_TOLERANCE = 0.05


def profile_memory_gb(memory_mib: int, device_memory_mib: int | None) -> int:
    """The ``<n>gb`` of a profile: its share of the board, in eighths, times the board's GB.

    Without the board's memory (NVML NOT_SUPPORTED on unified-memory parts) the profile's own
    memory is rounded to whole GB instead.
    """
    if not device_memory_mib:
        return math.floor(memory_mib / 1024 + 0.5)
    eighths = math.ceil(memory_mib / device_memory_mib * MEMORY_FRACTIONS - _TOLERANCE)
    board_gb = math.ceil(device_memory_mib / 1024)
    # NVIDIA rounds half up (Go's math.Round); Python's round() would round half to even.
    return math.floor(max(eighths, 1) / MEMORY_FRACTIONS * board_gb + 0.5)


def derived_profile_name(
    *, nvml_profile: int, slice_count: int, memory_mib: int, device_memory_mib: int | None
) -> str:
    """``<slices>g.<gb>gb<suffix>`` for an unnamed GPU instance profile."""
    gb = profile_memory_gb(memory_mib, device_memory_mib)
    return f"{slice_count}g.{gb}gb{_SUFFIXES.get(nvml_profile, '')}"
