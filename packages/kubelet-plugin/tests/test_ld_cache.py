"""The ``ld.so.cache`` reader: glibc's format as ldconfig writes it, and the lookups the
driver-root scan makes through it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from dra_kubelet_plugin.driver_files import DriverNotFoundError, driver_tool, scan_driver_root
from dra_kubelet_plugin.ld_cache import LdCacheEntry, LdCacheError, parse_ld_cache
from elf_support import write_library
from ld_cache_support import AARCH64_LIBC6, I386_LIBC6, ld_cache

ENTRIES = [
    ("libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"),
    ("libc.so.6", "/lib/x86_64-linux-gnu/libc.so.6"),
]
LDCONFIG = next(p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if Path(p).exists())


@pytest.mark.parametrize(
    ("legacy_prefix", "file_relative"), [(False, False), (True, False), (True, True)]
)
def test_entries_are_read_in_order_from_each_layout(
    legacy_prefix: bool, file_relative: bool
) -> None:
    data = ld_cache(ENTRIES, legacy_prefix=legacy_prefix, file_relative=file_relative)
    assert parse_ld_cache(data, "x86_64") == [LdCacheEntry(s, p) for s, p in ENTRIES]


def test_only_the_machines_64_bit_libraries_are_kept() -> None:
    assert parse_ld_cache(ld_cache(ENTRIES, flags=AARCH64_LIBC6), "x86_64") == []
    assert parse_ld_cache(ld_cache(ENTRIES, flags=I386_LIBC6), "x86_64") == []
    assert len(parse_ld_cache(ld_cache(ENTRIES, flags=AARCH64_LIBC6), "aarch64")) == 2


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "no glibc-ld.so.cache1.1 header"),
        (b"glibc-ld.so.cache1.1\x05", "truncated header"),
        (ld_cache(ENTRIES)[:60], "2 entries do not fit in 60 bytes"),
    ],
)
def test_unreadable_caches_are_refused_saying_why(data: bytes, reason: str) -> None:
    with pytest.raises(LdCacheError) as caught:
        parse_ld_cache(data, "x86_64")
    assert caught.value.reason == reason


def test_offsets_outside_the_file_are_refused() -> None:
    data = bytearray(ld_cache(ENTRIES))
    data[48 + 4 : 48 + 8] = (10**6).to_bytes(4, "little")  # the first entry's key
    with pytest.raises(LdCacheError, match="name no library"):
        parse_ld_cache(bytes(data), "x86_64")


def test_a_cache_written_by_this_machines_ldconfig_is_read(tmp_path: Path) -> None:
    # The real writer: a copy of the C library in a directory of our own, cached by ldconfig.
    libc = Path("/lib/x86_64-linux-gnu/libc.so.6").resolve()
    if not libc.exists():
        libc = Path("/lib64/libc.so.6").resolve()
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(libc, lib / "libc.so.6")
    (tmp_path / "ld.so.conf").write_text(f"{lib}\n")
    cache = tmp_path / "ld.so.cache"
    subprocess.run(
        [LDCONFIG, "-X", "-C", str(cache), "-f", str(tmp_path / "ld.so.conf")], check=True
    )
    entries = parse_ld_cache(cache.read_bytes())
    assert LdCacheEntry("libc.so.6", str(lib / "libc.so.6")) in entries


def _gke_root(root: Path, *, with_cache: bool = True) -> None:
    """The driver as GKE lays it out: /usr/local/nvidia/{lib64,bin}, found through the cache."""
    lib = root / "usr/local/nvidia/lib64"
    write_library(lib, "libcuda.so.580.159.04", "libcuda.so.1", "libcuda.so.1")
    write_library(lib, "libnvidia-ml.so.580.159.04", "libnvidia-ml.so.1", "libnvidia-ml.so.1")
    (root / "lib").mkdir()
    # What such hosts also have: a bare SONAME link, which alone names no version.
    (root / "lib/libnvidia-ml.so.1").symlink_to("/usr/local/nvidia/lib64/libnvidia-ml.so.1")
    smi = root / "usr/local/nvidia/bin/nvidia-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    if with_cache:
        (root / "etc").mkdir()
        (root / "etc/ld.so.cache").write_bytes(
            ld_cache(
                [
                    ("libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.1"),
                    ("libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"),
                ]
            )
        )


def test_a_driver_registered_with_ldconfig_is_found_through_the_cache(tmp_path: Path) -> None:
    _gke_root(tmp_path)
    files = scan_driver_root(tmp_path)
    assert files.version == "580.159.04"
    assert files.lib_dir == "/usr/local/nvidia/lib64"
    assert {lib.path for lib in files.libraries} == {
        "/usr/local/nvidia/lib64/libcuda.so.580.159.04",
        "/usr/local/nvidia/lib64/libnvidia-ml.so.580.159.04",
    }
    assert files.binaries == ("/usr/local/nvidia/bin/nvidia-smi",)


def test_the_tools_beside_the_libraries_win_over_wrappers_in_usr_bin(tmp_path: Path) -> None:
    # The H200 gpu-check host: /usr/bin/nvidia-smi is a wrapper script, the real tool sits in
    # /usr/local/nvidia/bin next to the libraries (nvidia-ctk mounts that one too).
    _gke_root(tmp_path)
    wrapper = tmp_path / "usr/bin/nvidia-smi"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text('#!/bin/sh\nexec /usr/local/nvidia/bin/nvidia-smi "$@"\n')
    wrapper.chmod(0o755)
    assert scan_driver_root(tmp_path).binaries == ("/usr/local/nvidia/bin/nvidia-smi",)


def test_without_the_cache_the_driver_is_not_found_and_the_error_says_where_it_looked(
    tmp_path: Path,
) -> None:
    _gke_root(tmp_path, with_cache=False)
    with pytest.raises(DriverNotFoundError, match=r"/etc/ld\.so\.cache"):
        scan_driver_root(tmp_path)


def test_a_corrupt_cache_leaves_the_directory_search_in_charge(tmp_path: Path) -> None:
    _gke_root(tmp_path, with_cache=False)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/ld.so.cache").write_bytes(b"garbage")
    write_library(tmp_path / "usr/lib64", "libcuda.so.550.1.2", "libcuda.so.1", "libcuda.so.1")
    assert scan_driver_root(tmp_path).version == "550.1.2"


def test_the_mps_control_daemon_is_run_from_beside_the_libraries(tmp_path: Path) -> None:
    _gke_root(tmp_path)
    control = tmp_path / "usr/local/nvidia/bin/nvidia-cuda-mps-control"
    control.write_text("#!/bin/sh\n")
    control.chmod(0o755)
    assert driver_tool(tmp_path, "nvidia-cuda-mps-control") == control.resolve()


def test_a_tool_not_installed_is_expected_in_usr_bin(tmp_path: Path) -> None:
    # No driver yet (the GPU Operator installs it later): the error of running it names this.
    assert driver_tool(tmp_path, "nvidia-cuda-mps-control") == (
        tmp_path.resolve() / "usr/bin/nvidia-cuda-mps-control"
    )
