"""Assembles an image base layer from Debian packages, without a registry or root.

The host's apt (package lists of the Debian release this machine runs, bookworm here) resolves
the dependency closure of a few root packages and downloads the exact ``.deb`` files into a cache
keyed by file name (which holds the version); each download is checked against the SHA-256 apt
reports. The files of each package (``dpkg-deb --fsys-tarfile``) are copied into the layer with
the merged-/usr layout of Debian images (``/bin`` -> ``usr/bin`` ...), without documentation, and
a ``/var/lib/dpkg/status`` lists what is installed so image scanners see the packages.

Another architecture's packages (arm64 on an amd64 host) come from the same sources through a
private apt state (:func:`apt_for`): its own package lists under the cache, fetched with
``apt-get update`` when missing or older than the host's, and ``APT::Architecture`` set to
that architecture. The host's dpkg configuration is never changed.

No maintainer scripts run. For the packages used here (a Python runtime, a shell, busybox) they
only register alternatives and compile bytecode, which the image builder does itself.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dra_oci import LayerBuilder

# Packages the closure walk never enters: the package manager and its helpers (an image built
# here is never changed with dpkg/apt inside), perl, awk. None of them is needed at run time.
EXCLUDED = frozenset(
    {
        "dpkg",
        "perl",
        "perl-base",
        "perl-modules-5.36",
        "libperl5.36",
        "libgdbm-compat4",
        "tar",
        "install-info",
        "debianutils",
        "debconf",
        "mailcap",
        "mime-support",
        "gawk",
        "mawk",
        "original-awk",
        "libsigsegv2",
        "libgmp10",
        "libmpfr6",
        "usrmerge",
        "usr-is-merged",
        "init-system-helpers",
    }
)

# Content a slim image does not carry (python:3.11-slim drops the same).
_SKIPPED_PREFIXES = (
    "usr/share/doc/",
    "usr/share/man/",
    "usr/share/info/",
    "usr/share/lintian/",
    "usr/share/locale/",
    "usr/share/bug/",
    "usr/share/doc-base/",
)

# Merged /usr: the top-level directories are symlinks into /usr, as in Debian 12 images.
_MERGED = ("bin", "sbin", "lib", "lib64")


class DebianError(RuntimeError):
    """apt or dpkg-deb failed, or a download did not match the hash apt expects."""


@dataclass(frozen=True)
class Apt:
    """How apt runs: the host's own configuration (no options), or a private state for another
    architecture (``-o`` options naming it)."""

    architecture: str
    options: tuple[str, ...] = ()

    def command(self, tool: str, *args: str) -> list[str]:
        """``tool`` (``apt-get``, ``apt-cache``) with this configuration and ``args``."""
        return [tool, *self.options, *args]


#: The host's apt as configured, for the host's own architecture.
HOST_APT = Apt("")

# The host's lists: a private state is refreshed when these change (after `apt-get update`).
HOST_LISTS = Path("/var/lib/apt/lists")


def host_architecture() -> str:
    """dpkg's architecture of this machine (``amd64``, ``arm64``)."""
    return _run(["dpkg", "--print-architecture"]).strip()


def apt_for(architecture: str, state: Path, *, host_lists: Path = HOST_LISTS) -> Apt:
    """apt for ``architecture``: the host's own for its architecture; otherwise a private state
    in ``state`` with that architecture's package lists from the host's sources, fetched when
    absent or when the host's lists changed since (so both architectures resolve the same
    release)."""
    if architecture == host_architecture():
        return HOST_APT
    apt = Apt(
        architecture,
        (
            "-o", f"APT::Architecture={architecture}",
            "-o", f"APT::Architectures={architecture}",
            "-o", f"Dir::State={state / 'state'}",
            "-o", f"Dir::State::status={state / 'status'}",
            "-o", f"Dir::Cache={state / 'cache'}",
        ),
    )  # fmt: skip
    stamp = state / "host-lists"
    fingerprint = _lists_fingerprint(host_lists)
    if stamp.is_file() and stamp.read_text() == fingerprint:
        return apt
    for sub in ("state/lists/partial", "cache/archives/partial"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    (state / "status").touch()
    _run(apt.command("apt-get", "update", "-q"))
    stamp.write_text(fingerprint)
    return apt


def _lists_fingerprint(lists: Path) -> str:
    """Names, sizes and times of the host's release files: they change at each update."""
    files = sorted(lists.glob("*Release")) if lists.is_dir() else []
    if not files:
        raise DebianError(f"apt has no package lists in {lists}; run `apt-get update`")
    return "".join(f"{f.name} {f.stat().st_size} {f.stat().st_mtime_ns}\n" for f in files)


@dataclass(frozen=True)
class Deb:
    """One package file as apt describes it."""

    package: str
    filename: str
    url: str
    size: int
    sha256: str


def closure(
    roots: Sequence[str], *, apt: Apt = HOST_APT, excluded: Iterable[str] = EXCLUDED
) -> list[str]:
    """The root packages and everything they depend on (Depends, Pre-Depends), sorted.

    Alternatives (``a | b``) take the first; virtual packages take their first provider.
    """
    skip = set(excluded)
    seen: set[str] = set()
    todo = [r for r in roots if r not in skip]
    while todo:
        batch = [p for p in dict.fromkeys(todo) if p not in seen]
        todo = []
        if not batch:
            break
        seen.update(batch)
        out = _run(
            apt.command(
                "apt-cache",
                "depends",
                "--no-recommends",
                "--no-suggests",
                "--no-conflicts",
                "--no-breaks",
                "--no-replaces",
                "--no-enhances",
                *batch,
            )
        )
        todo.extend(p for p in _first_alternatives(out) if p not in skip and p not in seen)
    return sorted(seen)


def _first_alternatives(apt_cache_output: str) -> list[str]:
    """Dependencies from `apt-cache depends` output, the first of each alternative group."""
    deps: list[str] = []
    in_group = False
    pending_virtual = False
    for line in apt_cache_output.splitlines():
        if pending_virtual and line.startswith("    "):
            # The first provider of a virtual package, listed indented below it.
            deps.append(line.strip())
            pending_virtual = False
            continue
        pending_virtual = False
        m = re.match(r"^  (\|?)(Pre)?Depends: (.+)$", line)
        if not m:
            continue
        alternative, name = m.group(1) == "|", m.group(3).strip()
        if not in_group:
            if name.startswith("<"):
                pending_virtual = True
            else:
                deps.append(name.split(":")[0])
        in_group = alternative
    return deps


def resolve(packages: Sequence[str], *, apt: Apt = HOST_APT) -> list[Deb]:
    """The candidate ``.deb`` of each package, with its URL and SHA-256."""
    out = _run(apt.command("apt-get", "download", "--print-uris", *packages))
    debs: list[Deb] = []
    for line in out.splitlines():
        m = re.match(r"^'(\S+)' (\S+) (\d+) SHA256:([0-9a-f]{64})$", line.strip())
        if m:
            url, filename, size, sha = m.groups()
            debs.append(Deb(filename.split("_")[0], filename, url, int(size), sha))
    missing = set(packages) - {d.package for d in debs}
    if missing:
        raise DebianError(f"apt has no download for {sorted(missing)}; run `apt-get update`")
    return sorted(debs, key=lambda d: d.package)


def fetch(debs: Sequence[Deb], cache: Path, *, apt: Apt = HOST_APT) -> list[Path]:
    """Each package file from the cache (file names hold version and architecture), downloading
    the missing ones with apt-get."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [d for d in debs if not _valid(cache / d.filename, d)]
    if missing:
        command = apt.command("apt-get", "download", *[d.package for d in missing])
        _run(command, cwd=cache)
        for d in missing:
            if not _valid(cache / d.filename, d):
                raise DebianError(f"{d.filename}: downloaded file does not match SHA256 {d.sha256}")
    return [cache / d.filename for d in debs]


def _valid(path: Path, deb: Deb) -> bool:
    if not path.is_file() or path.stat().st_size != deb.size:
        return False
    return hashlib.sha256(path.read_bytes()).hexdigest() == deb.sha256


def merged_path(path: str) -> str:
    """The path a package file has on a merged-/usr system."""
    while path.startswith("./"):
        path = path[2:]
    path = path.strip("/")
    head, _, rest = path.partition("/")
    if head in _MERGED:
        return f"usr/{head}/{rest}" if rest else f"usr/{head}"
    return path


def add_packages(layer: LayerBuilder, deb_files: Sequence[Path]) -> None:
    """Copies each package's files into the layer and records them in the dpkg status file."""
    for top in _MERGED:
        layer.add_symlink(top, f"usr/{top}")
    status: list[str] = []
    for deb in deb_files:
        _add_deb(layer, deb)
        control = _run(["dpkg-deb", "--field", str(deb)]).rstrip("\n")
        fields = control.split("\n")
        status.append(fields[0] + "\nStatus: install ok installed\n" + "\n".join(fields[1:]))
    layer.add_file("var/lib/dpkg/status", ("\n\n".join(status) + "\n").encode())


def _add_deb(layer: LayerBuilder, deb: Path) -> None:
    proc = subprocess.Popen(
        ["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        for member in tar:
            name = merged_path(member.name)
            if not name or name in _MERGED or name.startswith(_SKIPPED_PREFIXES):
                continue
            mode = member.mode & 0o7777
            if member.isdir():
                layer.add_dir(name, mode=mode)
            elif member.issym():
                layer.add_symlink(name, member.linkname)
            elif member.islnk():
                layer.add_hardlink(name, merged_path(member.linkname))
            elif member.isfile():
                data = tar.extractfile(member)
                assert data is not None
                layer.add_file(name, data.read(), mode=mode)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise DebianError(f"dpkg-deb --fsys-tarfile {deb.name}: {err.decode().strip()}")


def add_base_files(layer: LayerBuilder) -> None:
    """The few files every image has that no package ships here: users, groups, /tmp."""
    layer.add_file(
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/sh\n"
        b"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    )
    layer.add_file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    layer.add_dir("tmp", mode=0o1777)
    layer.add_dir("root", mode=0o700)
    layer.add_dir("proc")
    layer.add_dir("sys")
    layer.add_dir("dev")
    layer.add_dir("run")
    layer.add_dir("var/tmp", mode=0o1777)


def _run(cmd: Sequence[str], *, cwd: Path | None = None) -> str:
    env = {**os.environ, "LC_ALL": "C"}
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        command = " ".join(cmd[:3])
        raise DebianError(f"{command} ... failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout
