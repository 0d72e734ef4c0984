"""The one convention for artifacts built once from pinned sources (tests and tools only).

An artifact lives in ``<cache root>/<name>-<version>-<hash>/``, where the hash covers the
name and content of every input file and the build's flags, so a change to any of them
builds afresh and other checkouts reuse a finished build. A build runs under
``<entry>.lock`` (concurrent builders wait for the first), writes into ``<entry>.partial``,
puts ``.complete`` in it last and renames it into place, so an interrupted build is never
reused. The cache root is ``$<override variable>``, else ``$XDG_CACHE_HOME/<default name>``,
else ``~/.cache/<default name>``.

Used by the go-nvml mock library build (:mod:`dra_nvlib.mock_nvml_build`) and the e2e
harness's Go component builds (``dra_e2e.build``): nvlib is a leaf, so the convention lives
here and e2e imports it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["COMPLETE_MARKER", "build_once", "cache_root", "content_key", "is_complete", "locked"]

COMPLETE_MARKER = ".complete"


def cache_root(override_env: str, default_name: str) -> Path:
    """``$override_env``, else ``$XDG_CACHE_HOME/<default_name>``, else
    ``~/.cache/<default_name>``."""
    env = os.environ.get(override_env)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / default_name


def content_key(name: str, version: str, files: Iterable[Path], parts: Iterable[str]) -> str:
    """``<name>-<version>-<12 hex digits>``: a hash of each file's name and content, in the
    order given, then of each part (flags, package lists)."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    for part in parts:
        digest.update(part.encode())
    return f"{name}-{version}-{digest.hexdigest()[:12]}"


def is_complete(entry: Path) -> bool:
    """Whether ``entry`` holds a finished build."""
    return (entry / COMPLETE_MARKER).is_file()


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_once(entry: Path, build: Callable[[Path], None], *, marker: str) -> Path:
    """``entry``, built first by ``build(staging directory)`` unless already complete.

    ``marker`` is written to the ``.complete`` file (e.g. the version). An exception from
    ``build`` propagates and leaves only the ``.partial`` directory, which the next build
    clears.
    """
    with locked(entry.with_name(entry.name + ".lock")):
        if is_complete(entry):
            return entry
        staging = entry.with_name(entry.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        build(staging)
        (staging / COMPLETE_MARKER).write_text(marker)
        shutil.rmtree(entry, ignore_errors=True)
        staging.rename(entry)
        return entry
