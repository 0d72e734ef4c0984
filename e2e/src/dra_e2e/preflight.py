"""Checks the host before anything long starts, and installs the Debian packages that are missing.

``check(purpose)`` takes seconds and raises :class:`~dra_e2e.errors.PrerequisiteError`, whose
message is one line with the fix (``required tool 'runc' not found: apt-get install runc``).
``install_missing(purpose)`` runs ``apt-get install`` for the packages of the tools not found
(see :mod:`dra_e2e.prerequisites`, the one list) and refreshes apt's package lists when the image
builds need them. Both run before the 20-minute Kubernetes build, so a fresh machine fails fast.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from dra_e2e.build import GOBUILD_DIR, find_go
from dra_e2e.errors import PrerequisiteError, ToolMissingError
from dra_e2e.prerequisites import PREREQUISITES, Purpose, Tool, missing, missing_message, packages

Progress = Callable[[str], None]

#: Go 1.21 is the first that fetches the toolchain a go.mod asks for (GOTOOLCHAIN=auto).
MIN_GO = (1, 21)
APT_LISTS = "/var/lib/apt/lists/*_Packages*"
_GO_VERSION = re.compile(r"go(\d+)\.(\d+)(?:\.(\d+))?")
_GO_DIRECTIVE = re.compile(r"^go (\d+\.\d+(?:\.\d+)?)\s*$", re.MULTILINE)


def _quiet(_: str) -> None:
    return None


def parse_go_version(text: str) -> tuple[int, int, int] | None:
    """``(1, 26, 8)`` of ``go1.26.8`` (``go env GOVERSION``); None when it names no version."""
    match = _GO_VERSION.search(text)
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def wanted_go() -> str:
    """The newest ``go`` directive of the harness's module files (what the builds compile with)."""
    mods = sorted(GOBUILD_DIR.glob("*/go.mod"))
    found = [v for mod in mods for v in _GO_DIRECTIVE.findall(mod.read_text())]
    return max(found, key=lambda v: tuple(int(x) for x in v.split(".")), default="1.21")


def tool_path(tool: Tool) -> str | None:
    """Where ``tool`` is here: the command on PATH, or the first of its paths that exists."""
    if not tool.paths:
        return shutil.which(tool.name)
    return next((p for p in tool.paths if Path(p).exists()), None)


def _present(tool: Tool) -> bool:
    return tool_path(tool) is not None


def _apt() -> bool:
    return shutil.which("apt-get") is not None


def require(name: str) -> str:
    """The path of the listed tool ``name`` (e.g. ``runc``); a one-line error when absent."""
    (prerequisite,) = (p for p in PREREQUISITES if p.tool.name == name)
    path = tool_path(prerequisite.tool)
    if path is None:
        raise PrerequisiteError(*missing_message([prerequisite], apt=_apt()))
    return path


def check_host() -> None:
    """Linux, and root: the kubelet and containerd manage mounts, cgroups and network devices."""
    if not sys.platform.startswith("linux"):
        raise PrerequisiteError(
            f"the local cluster runs only on Linux (this is {sys.platform})",
            "use a Linux machine, or an existing cluster with --kubeconfig",
        )
    if os.geteuid() != 0:
        raise PrerequisiteError(
            "must run as root (it starts a kubelet and containerd)", "run it again with sudo"
        )


def check_tools(purpose: Purpose) -> None:
    """Every tool of ``purpose`` is present."""
    absent = missing(purpose, _present)
    if absent:
        raise PrerequisiteError(*missing_message(absent, apt=_apt()))


def check_go() -> None:
    """A Go that can build the pinned components (it fetches the pinned toolchain if older)."""
    want = wanted_go()
    fix = f"install Go >= {want} from https://go.dev/dl into /usr/local/go (or set DRA_E2E_GO)"
    try:
        go = find_go()
    except ToolMissingError:
        raise PrerequisiteError("required tool 'go' not found", fix) from None
    proc = subprocess.run(
        [str(go), "env", "GOVERSION"], capture_output=True, text=True, timeout=30, check=False
    )
    version = parse_go_version(proc.stdout)
    if proc.returncode != 0 or version is None:
        raise PrerequisiteError(f"{go} does not run ({proc.stderr.strip()[:200]})", fix)
    if version[:2] < MIN_GO:
        have = ".".join(map(str, version))
        raise PrerequisiteError(f"Go {have} at {go} is too old to fetch Go {want}", fix)


def check_apt_lists(purpose: Purpose) -> None:
    """apt has package lists: the image builds download their .debs with ``apt-get download``."""
    if purpose >= Purpose.E2E and not glob.glob(APT_LISTS):
        raise PrerequisiteError(
            "apt has no package lists (the image builds download Debian packages)",
            "apt-get update",
        )


def check(purpose: Purpose) -> None:
    """Everything ``purpose`` needs, cheapest first; raises PrerequisiteError on the first gap."""
    check_host()
    check_tools(purpose)
    check_go()
    check_apt_lists(purpose)


def _apt_get(*args: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    proc = subprocess.run(
        ["apt-get", *args], capture_output=True, text=True, env=env, timeout=1800, check=False
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise PrerequisiteError(f"apt-get {' '.join(args)} failed ({last})", "fix apt, then rerun")


def install_missing(purpose: Purpose, *, progress: Progress = _quiet) -> list[str]:
    """Install the Debian packages of the tools of ``purpose`` that are missing; return them.

    Also fetches apt's package lists when the image builds need them and there are none.
    Nothing runs when nothing is missing; without root or apt it only checks (``check`` then
    names what to install).
    """
    check_host()
    todo = packages(missing(purpose, _present))
    need_lists = purpose >= Purpose.E2E and not glob.glob(APT_LISTS)
    if not _apt() or not (todo or need_lists):
        return []
    progress("[dra-e2e] apt-get update")
    _apt_get("update", "-qq")
    if todo:
        progress(f"[dra-e2e] installing Debian packages: {' '.join(todo)}")
        _apt_get("install", "-y", "-qq", "--no-install-recommends", *todo)
    return todo
