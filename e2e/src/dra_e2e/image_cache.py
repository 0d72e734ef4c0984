"""The project's image archives, built once per content and reused: ``~/.cache/dra-images/``.

Every driver install (one per e2e module, and the demo) needs the driver image and the workload
stand-in (``images/build_image.py``), which take minutes to build on two cores. An archive is
kept under ``<root>/<kind>-<key>/image.tar`` where the key hashes every input the build reads:

- the workspace files as git sees them (tracked and untracked-but-not-ignored, with their
  current content on disk) under the paths of :data:`INPUT_PATHS`: the package sources,
  ``pyproject.toml`` files and READMEs that go into the wheels (not their tests), the root
  ``pyproject.toml`` and ``uv.lock`` (the pinned third-party versions), ``images/`` (the build
  scripts and the Debian package lists), the OCI writer they import and the chart's
  ``Chart.yaml`` (the image tag);
- the state apt resolves the ``.deb`` versions from (its package index files and sources), so
  an ``apt-get update`` that brings a new package version rebuilds;
- the build flags: the image kind, the Python that runs the build and compiles bytecode, the
  ``uv`` that builds the wheels, and the ``UV_*`` settings that steer it.

Building follows the binary cache's conventions (:mod:`dra_e2e.build`): a lock file per entry, so
a concurrent second builder waits and then reuses the first one's archive; the build writes into
``<entry>.partial`` and is renamed into place with a ``.complete`` marker, so a crash never
leaves a half-written archive that a later run would use. Outside a git checkout the key cannot
be made sound, and every call builds afresh.

``source_digest`` and ``image_key`` hash what they are given; ``cached_archive`` does the
locking and renaming.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from dra_e2e.errors import E2EError

#: What the image build reads from the checkout (``git ls-files`` pathspecs). A package's
#: wheel holds only its ``src/`` package and metadata (``[tool.hatch.build.targets.wheel]``
#: ``packages``), so its tests and benchmarks are left out: editing them rebuilds nothing.
INPUT_PATHS = (
    "packages",
    ":(exclude,glob)packages/*/tests/**",
    ":(exclude,glob)packages/*/bench/**",
    "pyproject.toml",
    "uv.lock",
    "images",
    "e2e/pyproject.toml",
    "deployments/helm/dra-driver-nvidia-gpu/Chart.yaml",
)
#: apt's inputs when it picks a package version: its index files and its configuration.
APT_STATE = (
    Path("/var/lib/apt/lists"),
    Path("/etc/apt/sources.list"),
    Path("/etc/apt/sources.list.d"),
    Path("/etc/apt/preferences.d"),
)
ARCHIVE = "image.tar"
COMPLETE = ".complete"
#: Entries unused for this long are removed when another entry of their kind is built.
PRUNE_AFTER_S = 2 * 24 * 3600.0


class NotACheckoutError(E2EError):
    """The repository is not a git checkout, so its inputs cannot be listed as git sees them."""

    def __init__(self, repo: Path, detail: str) -> None:
        self.repo = repo
        super().__init__(f"image cache: {repo} is not a usable git checkout: {detail}")


def cache_root() -> Path:
    """Root of the image cache: ``$DRA_E2E_IMAGE_CACHE`` or ``~/.cache/dra-images``."""
    env = os.environ.get("DRA_E2E_IMAGE_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "dra-images"


def input_files(repo: Path, paths: Sequence[str] = INPUT_PATHS) -> list[str]:
    """The files under ``paths`` that git sees in ``repo`` (tracked, or untracked and not
    ignored), relative to ``repo`` and sorted; :class:`NotACheckoutError` outside git."""
    try:
        proc = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *paths],
            cwd=repo,
            capture_output=True,
            check=False,
        )
    except OSError as exc:
        raise NotACheckoutError(repo, str(exc)) from exc
    if proc.returncode != 0:
        raise NotACheckoutError(repo, proc.stderr.decode(errors="replace").strip())
    return sorted({name for name in proc.stdout.decode().split("\0") if name})


def source_digest(repo: Path, files: Sequence[str]) -> str:
    """SHA-256 over each file's name and current content (a tracked file deleted on disk
    counts as its own distinct state)."""
    digest = hashlib.sha256()
    for name in files:
        digest.update(name.encode() + b"\0")
        path = repo / name
        if path.is_symlink():
            digest.update(b"link:" + os.readlink(path).encode())
        elif path.is_file():
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        else:
            digest.update(b"missing")
        digest.update(b"\0")
    return digest.hexdigest()


def apt_state(paths: Sequence[Path] = APT_STATE) -> list[str]:
    """One line per file apt picks versions from: path, size and modification time (apt
    rewrites an index file whenever ``apt-get update`` changes it)."""
    lines: list[str] = []
    for root in paths:
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in files:
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            lines.append(f"{path} {st.st_size} {st.st_mtime_ns}")
    return lines


def build_flags(kind: str, *, env: Mapping[str, str] | None = None) -> list[str]:
    """What else shapes the archive: the kind, the build's Python, uv and its settings."""
    env = os.environ if env is None else env
    uv = shutil.which("uv", path=env.get("PATH"))
    uv_version = _uv_version(uv) if uv is not None else "none"
    settings = sorted(f"{k}={v}" for k, v in env.items() if k.startswith("UV_"))
    return [f"kind={kind}", f"python={sys.version}", f"uv={uv_version}", *settings]


@functools.lru_cache(maxsize=8)
def _uv_version(uv: str) -> str:
    # One call per process: the same uv binary does not change while the harness runs.
    proc = subprocess.run([uv, "--version"], capture_output=True, text=True, check=False)
    return proc.stdout.strip()


def image_key(kind: str, sources: str, apt: Sequence[str], flags: Sequence[str]) -> str:
    """The cache entry's name: ``<kind>-<hash of sources, apt state and flags>``."""
    digest = hashlib.sha256(sources.encode())
    for part in (*apt, *flags):
        digest.update(b"\0" + part.encode())
    return f"{kind}-{digest.hexdigest()[:16]}"


def current_key(kind: str, repo: Path) -> str:
    """The key of ``kind`` built from ``repo`` as it is now (:class:`NotACheckoutError`
    outside git)."""
    sources = source_digest(repo, input_files(repo))
    return image_key(kind, sources, apt_state(), build_flags(kind))


@contextmanager
def _locked(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def cached_archive(key: str, build: Callable[[Path], object], *, root: Path | None = None) -> Path:
    """The archive of ``key``, calling ``build(path)`` to write it first when the cache has
    none. Concurrent callers of one key wait on its lock, and only the first one builds."""
    entry = (root or cache_root()) / key
    with _locked(entry.with_name(entry.name + ".lock")):
        archive = entry / ARCHIVE
        if (entry / COMPLETE).is_file() and archive.is_file():
            # Marks it used, so that pruning keeps it.
            os.utime(entry / COMPLETE)
            return archive
        staging = entry.with_name(entry.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        build(staging / ARCHIVE)
        if not (staging / ARCHIVE).is_file():
            raise E2EError(f"image cache: the build of {key} wrote no {ARCHIVE}")
        (staging / COMPLETE).write_text(f"{key}\n")
        shutil.rmtree(entry, ignore_errors=True)
        staging.rename(entry)
    prune(key, root=root)
    return archive


def prune(key: str, *, root: Path | None = None, older_than_s: float = PRUNE_AFTER_S) -> list[Path]:
    """Removes the other entries of ``key``'s kind that nobody used for ``older_than_s``
    (skipping any whose lock another process holds); returns what it removed."""
    base = root or cache_root()
    kind = key.rsplit("-", 1)[0]
    cutoff = time.time() - older_than_s
    removed: list[Path] = []
    for marker in sorted(base.glob(f"{kind}-*/{COMPLETE}")):
        entry = marker.parent
        if entry.name == key or entry.name.rsplit("-", 1)[0] != kind:
            continue
        with _locked(entry.with_name(entry.name + ".lock"), blocking=False) as held:
            if held and marker.stat().st_mtime < cutoff:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed
