"""Builds the mock ``libnvidia-ml.so`` over NVIDIA's go-nvml mock systems (tests and
benchmarks only; never used at run time).

The library is our Go program ``packages/nvlib/tests/nvml_gomock`` (its go.mod pins
``github.com/NVIDIA/go-nvml``), built with ``go build -buildmode=c-shared`` into
``~/.cache/dra-nvlib/nvml-gomock-<go-nvml version>-<hash>/`` (``$DRA_NVLIB_CACHE`` or
``$XDG_CACHE_HOME/dra-nvlib`` when set), the cache convention of :mod:`dra_nvlib.build_cache`
that the e2e harness's Go builds share: the hash covers the sources, module files and build
flags; a lock serialises concurrent builds; ``.complete`` is written last.

go-nvml's own cgo wrappers reference every NVML symbol. ctypes loads with ``RTLD_NOW``, so
the build links twice: the first link lists the NVML symbols still undefined, the second
binds each of them (``ld --defsym``) to one function answering
``NVML_ERROR_FUNCTION_NOT_FOUND`` (``absent.c``) -- what nvidia-ml-py reports for a symbol a
driver's library lacks.

``DRA_NVML_MOCK_SYSTEM`` (read by the library at ``nvmlInit``) selects the mock system and
``DRA_NVML_MOCK_MIG`` the MIG devices it has from the start (``<gpu index>:<GPU instance
profile id>@<placement start>,...``, each with one compute instance spanning it; the mock's
profile ids are NVML's profile indexes), so another process (``nvidia-ctk``) given the same
environment sees the same MIG devices;
``DRA_NVLIB_MOCKNVML_DIR`` points at an already built directory holding
``libnvidia-ml.so.1`` instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from dra_nvlib.build_cache import build_once, content_key, is_complete
from dra_nvlib.build_cache import cache_root as _cache_root

SOURCE_DIR = Path(__file__).resolve().parents[2] / "tests" / "nvml_gomock"
LIBRARY_NAME = "libnvidia-ml.so.1"
SYSTEM_ENV = "DRA_NVML_MOCK_SYSTEM"
MIG_LAYOUT_ENV = "DRA_NVML_MOCK_MIG"
# The mock systems of github.com/NVIDIA/go-nvml/pkg/nvml/mock (main.go maps each to its New).
MOCK_SYSTEMS = ("dgxa100", "dgxh100", "dgxh200", "dgxb200")
GO_NVML_MODULE = "github.com/NVIDIA/go-nvml"
ABSENT_FUNCTION = "dra_nvml_gomock_absent"
CGO_CFLAGS = "-O2 -Wno-deprecated-declarations"
LDFLAGS = ("-s", "-w")
BUILD_TIMEOUT_S = 1200


class MockNvmlUnavailable(RuntimeError):
    """A tool needed to build the mock (Go, a C compiler, nm) is not installed."""


class MockNvmlBuildError(RuntimeError):
    """``go build`` of the mock failed; ``log`` holds its output."""

    def __init__(self, step: str, log: str) -> None:
        self.step = step
        self.log = log
        super().__init__(f"nvml-gomock {step} failed:\n{log[-3000:]}")


@dataclass(frozen=True)
class MockNvml:
    """A built mock library and the environment that selects each mock system."""

    library: Path

    @property
    def systems(self) -> tuple[str, ...]:
        """The mock systems the library serves."""
        return MOCK_SYSTEMS

    def env(self, system: str, *, mig_layout: str | None = None) -> dict[str, str]:
        """Environment for a process that should see ``system`` (one of ``systems``), with
        the MIG devices of ``mig_layout`` (see the module docstring) when given."""
        if system not in MOCK_SYSTEMS:
            raise ValueError(f"{system!r} is not a go-nvml mock system ({', '.join(MOCK_SYSTEMS)})")
        env = {SYSTEM_ENV: system}
        if mig_layout is not None:
            env[MIG_LAYOUT_ENV] = mig_layout
        return env


def go_nvml_version(source_dir: Path = SOURCE_DIR) -> str:
    """The go-nvml version pinned in the program's go.mod."""
    text = (source_dir / "go.mod").read_text()
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(GO_NVML_MODULE)}\s+(\S+)", text, re.M)
    if found is None:
        raise MockNvmlBuildError("reading go.mod", f"no {GO_NVML_MODULE} requirement")
    return found.group(1)


def cache_key(source_dir: Path = SOURCE_DIR) -> str:
    """``nvml-gomock-<version>-<hash of sources, module files and flags>``."""
    return content_key(
        "nvml-gomock",
        go_nvml_version(source_dir),
        sorted(p for p in source_dir.iterdir() if p.is_file()),
        (CGO_CFLAGS, *LDFLAGS, ABSENT_FUNCTION),
    )


def cache_root() -> Path:
    """``$DRA_NVLIB_CACHE``, else ``$XDG_CACHE_HOME/dra-nvlib``, else ``~/.cache/dra-nvlib``."""
    return _cache_root("DRA_NVLIB_CACHE", "dra-nvlib")


def undefined_nvml_symbols(nm_output: str) -> list[str]:
    """NVML function names listed as undefined by ``nm -D --undefined-only``."""
    names = set()
    for line in nm_output.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[-2] == "U" and parts[-1].startswith("nvml"):
            names.add(parts[-1])
    return sorted(names)


def _progress(message: str) -> None:
    sys.stderr.write(f"[nvml-gomock] {message}\n")
    sys.stderr.flush()


def _tool(name: str, *fallbacks: str) -> str:
    for candidate in (shutil.which(name), *fallbacks):
        if candidate and Path(candidate).is_file():
            return candidate
    raise MockNvmlUnavailable(f"{name} is not installed (needed to build the mock NVML)")


def _run(step: str, cmd: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        raise MockNvmlBuildError(step, proc.stdout + proc.stderr)
    return proc.stdout


def build_mock_nvml(*, source_dir: Path = SOURCE_DIR, root: Path | None = None) -> MockNvml:
    """The built mock (from the cache when present); MockNvmlUnavailable without the tools,
    MockNvmlBuildError when the build fails."""
    prebuilt = os.environ.get("DRA_NVLIB_MOCKNVML_DIR")
    if prebuilt:
        return MockNvml(Path(prebuilt) / LIBRARY_NAME)
    if not (source_dir / "go.mod").is_file():
        raise MockNvmlUnavailable(f"{source_dir} is missing (not a source checkout)")
    final = (root or cache_root()) / cache_key(source_dir)
    if is_complete(final):
        return MockNvml(final / LIBRARY_NAME)
    go = _tool("go", "/usr/local/go/bin/go")
    _tool("cc", shutil.which("gcc") or "")
    nm = _tool("nm")
    env = {
        **os.environ,
        "CGO_ENABLED": "1",
        "CGO_CFLAGS": CGO_CFLAGS,
        "GOFLAGS": "-mod=readonly -buildvcs=false",
        "GOTOOLCHAIN": os.environ.get("GOTOOLCHAIN", "auto"),
        "PATH": f"{Path(go).parent}:{os.environ.get('PATH', '')}",
    }

    def build(staging: Path) -> None:
        library = staging / LIBRARY_NAME
        cmd = ["nice", "-n", "10", go, "build", "-buildmode=c-shared", "-trimpath"]
        started = time.monotonic()
        _progress(
            f"go build -buildmode=c-shared {source_dir} -> {final} (cold: one to three minutes)"
        )
        _run(
            "first link",
            [*cmd, "-ldflags", " ".join(LDFLAGS), "-o", str(library), "."],
            cwd=source_dir,
            env=env,
        )
        symbols = undefined_nvml_symbols(
            _run("nm", [nm, "-D", "--undefined-only", str(library)], cwd=source_dir, env=env)
        )
        response = staging / "absent.rsp"
        response.write_text("".join(f"--defsym={s}={ABSENT_FUNCTION}\n" for s in symbols))
        ldflags = " ".join((*LDFLAGS, f"'-extldflags=-Wl,@{response}'"))
        _run(
            "second link",
            [*cmd, "-ldflags", ldflags, "-o", str(library), "."],
            cwd=source_dir,
            env=env,
        )
        left = undefined_nvml_symbols(
            _run("nm", [nm, "-D", "--undefined-only", str(library)], cwd=source_dir, env=env)
        )
        if left:
            raise MockNvmlBuildError("second link", "still undefined: " + ", ".join(left))
        _progress(f"built {final / LIBRARY_NAME} in {time.monotonic() - started:.0f}s")

    build_once(final, build, marker=f"{go_nvml_version(source_dir)}\n")
    return MockNvml(final / LIBRARY_NAME)
