"""The ``DT_SONAME`` of an ELF shared library.

:func:`soname_of` is pure: it reads through a ``read_at(offset, size)`` callable, so only the
headers and tables are read from a driver library of hundreds of megabytes;
:func:`soname_of_file` is that reader over a file.

The CDI spec links each mounted driver library under its SONAME (``libcuda.so.1`` for
``libcuda.so.550.54.15``), as nvidia-container-toolkit does, so the name programs open must
come from the library itself, not from guessing at the file name.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

__all__ = ["ElfError", "ReadAt", "soname_of", "soname_of_file"]

#: ``read_at(offset, size)``: up to ``size`` bytes from ``offset`` (fewer at the end).
ReadAt = Callable[[int, int], bytes]

_SHT_DYNAMIC = 6
_DT_NULL = 0
_DT_SONAME = 14


class ElfError(ValueError):
    """The bytes are not a well-formed ELF shared object."""


def soname_of(read_at: ReadAt) -> str | None:
    """The library's ``DT_SONAME``, or ``None`` when it declares none.

    Raises:
        ElfError: not an ELF file, or its section or dynamic tables are cut short.
    """
    data = read_at(0, 64)
    if len(data) < 16 or data[:4] != b"\x7fELF":
        raise ElfError("not an ELF file")
    is_64 = {1: False, 2: True}.get(data[4])
    order = {1: "<", 2: ">"}.get(data[5])
    if is_64 is None or order is None:
        raise ElfError(f"unknown ELF class {data[4]} or byte order {data[5]}")
    try:
        if is_64:
            shoff, shentsize, shnum = _unpack(order + "40xQ10xHH", data, 0)
            section_fmt, dyn_fmt = order + "4xI16xQQI", order + "qQ"
        else:
            shoff, shentsize, shnum = _unpack(order + "32xI10xHH", data, 0)
            section_fmt, dyn_fmt = order + "4xI8xIII", order + "iI"
        table = read_at(shoff, shentsize * shnum)
        sections = [_unpack(section_fmt, table, i * shentsize) for i in range(shnum)]
        for sh_type, offset, size, link in sections:
            if sh_type != _SHT_DYNAMIC:
                continue
            if link >= len(sections):
                raise ElfError(f"dynamic section links to missing section {link}")
            strtab_offset, strtab_size = sections[link][1], sections[link][2]
            dynamic = read_at(offset, size)
            entry = struct.calcsize(dyn_fmt)
            for pos in range(0, size - entry + 1, entry):
                tag, value = _unpack(dyn_fmt, dynamic, pos)
                if tag == _DT_NULL:
                    break
                if tag == _DT_SONAME:
                    name = read_at(strtab_offset + value, max(strtab_size - value, 0))
                    return name[: name.index(b"\0")].decode()
    except (struct.error, ValueError) as exc:
        if isinstance(exc, ElfError):
            raise
        raise ElfError(f"truncated ELF file: {exc}") from exc
    return None


def soname_of_file(path: Path) -> str | None:
    """:func:`soname_of` of the file at ``path`` (``OSError`` when it cannot be read)."""
    with path.open("rb") as fh:

        def read_at(offset: int, size: int) -> bytes:
            fh.seek(offset)
            return fh.read(size)

        return soname_of(read_at)


def _unpack(fmt: str, data: bytes, offset: int) -> tuple[int, ...]:
    return struct.unpack_from(fmt, data, offset)
