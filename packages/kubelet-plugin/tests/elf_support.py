"""A minimal ELF64 shared object as bytes: a ``.dynstr`` and a ``.dynamic`` with a SONAME.

Enough for :mod:`dra_kubelet_plugin.elf_soname` (which reads section headers), so unit tests
lay out driver libraries with their real SONAMEs without a C compiler.
"""

from __future__ import annotations

import struct
from pathlib import Path

_DT_SONAME = 14


def elf_library(soname: str | None, *, big_endian: bool = False) -> bytes:
    """An ELF64 ``ET_DYN`` whose dynamic section names ``soname`` (none when ``None``)."""
    order = ">" if big_endian else "<"
    dynstr = b"\0" + (soname.encode() + b"\0" if soname else b"")
    dynstr += b"\0" * (-len(dynstr) % 8)
    entries = [(_DT_SONAME, 1)] if soname else []
    dynamic = b"".join(struct.pack(order + "qQ", t, v) for t, v in [*entries, (0, 0)])
    dynstr_off = 64
    dynamic_off = dynstr_off + len(dynstr)
    shoff = dynamic_off + len(dynamic)
    ident = b"\x7fELF" + bytes([2, 2 if big_endian else 1, 1]) + b"\0" * 9
    header = struct.pack(
        order + "16sHHIQQQIHHHHHH", ident, 3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, 3, 0
    )
    null = b"\0" * 64
    strtab = struct.pack(order + "IIQQQQIIQQ", 0, 3, 0, 0, dynstr_off, len(dynstr), 0, 0, 1, 0)
    dyn = struct.pack(order + "IIQQQQIIQQ", 0, 6, 0, 0, dynamic_off, len(dynamic), 1, 0, 8, 16)
    return header + dynstr + dynamic + null + strtab + dyn


def write_library(directory: Path, name: str, soname: str | None, *links: str) -> Path:
    """Write ``directory/name`` as a library with ``soname``, plus symlinks ``links`` to it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(elf_library(soname))
    for link in links:
        (directory / link).symlink_to(name)
    return path
