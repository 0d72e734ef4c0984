"""An ``ld.so.cache`` as bytes, in glibc's new format (optionally after a legacy table), so
tests lay out driver roots whose libraries are found only through the cache."""

from __future__ import annotations

import struct
from collections.abc import Sequence

X86_64_LIBC6 = 0x0303
AARCH64_LIBC6 = 0x0A03
I386_LIBC6 = 0x0003


def ld_cache(
    entries: Sequence[tuple[str, str]],
    *,
    flags: int = X86_64_LIBC6,
    legacy_prefix: bool = False,
    file_relative: bool = False,
) -> bytes:
    """A cache mapping each (soname, path) of ``entries``; ``legacy_prefix`` puts an
    ``ld.so-1.7.0`` table first; ``file_relative`` makes string offsets count from the file's
    start, as old ldconfigs wrote them."""
    legacy = b""
    if legacy_prefix:
        legacy = b"ld.so-1.7.0\0" + struct.pack("<I", 0)
        legacy += b"\0" * (-len(legacy) % 8)
    header_size, entry_size = 48, 24
    strings = b""
    offsets: list[tuple[int, int]] = []
    strings_at = header_size + entry_size * len(entries)
    base = len(legacy) if file_relative else 0
    for soname, path in entries:
        key = base + strings_at + len(strings)
        strings += soname.encode() + b"\0"
        value = base + strings_at + len(strings)
        strings += path.encode() + b"\0"
        offsets.append((key, value))
    header = struct.pack("<20sIIB3xI12x", b"glibc-ld.so.cache1.1", len(entries), len(strings), 2, 0)
    table = b"".join(struct.pack("<iIIIQ", flags, k, v, 0, 0) for k, v in offsets)
    return legacy + header + table + strings
