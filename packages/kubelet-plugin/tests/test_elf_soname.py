"""SONAMEs read from ELF shared objects."""

from __future__ import annotations

from pathlib import Path

import pytest
from dra_kubelet_plugin.elf_soname import ElfError, ReadAt, soname_of, soname_of_file
from elf_support import elf_library


def _reader(data: bytes) -> ReadAt:
    return lambda offset, size: data[offset : offset + size]


@pytest.mark.parametrize("big_endian", [False, True])
def test_soname_of_a_library(big_endian: bool) -> None:
    data = elf_library("libcuda.so.1", big_endian=big_endian)
    assert soname_of(_reader(data)) == "libcuda.so.1"


def test_library_without_soname() -> None:
    assert soname_of(_reader(elf_library(None))) is None


def test_not_an_elf_file_and_truncated_file_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ElfError, match="not an ELF"):
        soname_of(_reader(b"#!/bin/sh\n" * 10))
    with pytest.raises(ElfError, match="truncated"):
        soname_of(_reader(elf_library("libx.so.1")[:100]))
    (tmp_path / "empty.so").write_bytes(b"")
    with pytest.raises(ElfError):
        soname_of_file(tmp_path / "empty.so")


def test_soname_of_the_running_libc() -> None:
    # A real library built by a real linker: the C library this interpreter runs on.
    maps = Path("/proc/self/maps").read_text().split()
    libc = next(Path(p) for p in maps if "/libc.so" in p or "/libc-" in p)
    assert soname_of_file(libc) == "libc.so.6"
