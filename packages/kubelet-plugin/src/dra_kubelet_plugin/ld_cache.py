"""glibc's ``ld.so.cache``, read the way the dynamic loader reads it: which file a SONAME
resolves to.

Drivers are not always installed in the multiarch or ``lib64`` directories: GKE-style
installs put them in ``/usr/local/nvidia/lib64`` (or under ``/home/kubernetes/bin/nvidia``)
and register that directory with ``ldconfig``; the dynamic loader, and
nvidia-container-toolkit's library lookup, then find ``libcuda.so.1`` through the cache.
This module is pure: it decodes the bytes of a cache file; reading the file is the caller's.

The format is glibc's "new" one (``glibc-ld.so.cache1.1``), written alone by glibc 2.32 and
later and after a legacy ``ld.so-1.7.0`` table by older ones. String offsets are relative to
the new header; a cache written by an old ldconfig, where they are relative to the file's
start, is recognised by its offsets not naming a library.
"""

from __future__ import annotations

import platform
import struct
from dataclasses import dataclass

__all__ = ["LdCacheEntry", "LdCacheError", "parse_ld_cache"]

_MAGIC = b"glibc-ld.so.cache1.1"
# magic, nlibs, len_strings, flags + 3 unused bytes, extension_offset, 3 unused words.
_HEADER = struct.Struct("<20sIIB3xI12x")
# flags, key, value, osversion, hwcap.
_ENTRY = struct.Struct("<iIIIQ")
_FLAG_TYPE_MASK = 0x00FF
_FLAG_ELF_LIBC6 = 0x0003
_FLAG_ARCH_MASK = 0xFF00
# The architecture bits ldconfig sets on 64-bit libraries, per machine (glibc's ldconfig.h).
_ARCH_FLAGS = {"x86_64": 0x0300, "aarch64": 0x0A00, "arm64": 0x0A00}


class LdCacheError(ValueError):
    """The bytes are not an ``ld.so.cache`` this module can read; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"ld.so.cache: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class LdCacheEntry:
    """One library of the cache: its SONAME and the path the loader would open."""

    soname: str
    path: str


def _string(data: bytes, offset: int) -> str | None:
    if not 0 <= offset < len(data):
        return None
    end = data.find(b"\0", offset)
    if end < 0:
        return None
    try:
        return data[offset:end].decode()
    except UnicodeDecodeError:
        return None


def _raw_entries(data: bytes, start: int) -> list[tuple[int, int, int]]:
    try:
        _magic, nlibs, _strings, _flags, _ext = _HEADER.unpack_from(data, start)
    except struct.error as exc:
        raise LdCacheError("truncated header") from exc
    first = start + _HEADER.size
    if first + nlibs * _ENTRY.size > len(data):
        raise LdCacheError(f"{nlibs} entries do not fit in {len(data)} bytes")
    return [
        (flags, key, value)
        for flags, key, value, _os, _hwcap in _ENTRY.iter_unpack(
            data[first : first + nlibs * _ENTRY.size]
        )
    ]


def parse_ld_cache(data: bytes, machine: str | None = None) -> list[LdCacheEntry]:
    """The 64-bit glibc libraries of the cache ``data`` for ``machine`` (default: this
    machine's ``platform.machine()``), in the cache's order (the loader's preference).

    Raises :class:`LdCacheError` when ``data`` holds no new-format cache or is truncated.
    """
    start = data.find(_MAGIC)
    if start < 0:
        raise LdCacheError("no glibc-ld.so.cache1.1 header")
    raw = _raw_entries(data, start)
    arch = _ARCH_FLAGS.get(machine if machine is not None else platform.machine())
    # Offsets relative to the new header (glibc >= 2.32), else to the file (older ldconfig).
    for base in (start, 0):
        entries: list[LdCacheEntry] = []
        for flags, key, value in raw:
            soname, path = _string(data, base + key), _string(data, base + value)
            if soname is None or path is None or not path.startswith("/"):
                break
            if (flags & _FLAG_TYPE_MASK) != _FLAG_ELF_LIBC6:
                continue
            if arch is not None and (flags & _FLAG_ARCH_MASK) != arch:
                continue
            entries.append(LdCacheEntry(soname, path))
        else:
            return entries
    raise LdCacheError("its string offsets name no library")
