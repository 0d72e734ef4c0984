"""Builds NVIDIA's mock ``libnvidia-ml.so`` for tests and benchmarks (not used at run time).

The mock is the Go package ``github.com/NVIDIA/k8s-test-infra/pkg/gpu/mocknvml/bridge``,
fetched through the Go module proxy and built with ``go build -buildmode=c-shared`` into
``~/.cache/dra-nvlib/mocknvml-<version>/`` (outside any repository, keyed by version).
``DRA_NVLIB_MOCKNVML_DIR`` may point at an already built directory holding
``libnvidia-ml.so.1`` and the module's ``configs/``; ``DRA_NVLIB_MOCKNVML_VERSION`` pins the
module version (default ``latest``). Its YAML profiles are selected per process with the
``MOCK_NVML_CONFIG`` environment variable before NVML is initialised.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


class MockNvmlUnavailable(RuntimeError):
    """The mock could not be fetched or built; the message says why."""


MOCK_MODULE = "github.com/NVIDIA/k8s-test-infra"
MOCK_VERSION = os.environ.get("DRA_NVLIB_MOCKNVML_VERSION", "latest")
CONFIG_SUBDIR = "pkg/gpu/mocknvml/configs"


@dataclass(frozen=True)
class MockNvml:
    """A built mock: the library and the directory of its YAML profiles."""

    library: Path
    configs: Path

    def profile(self, name: str) -> Path:
        """``configs/mock-nvml-config-<name>.yaml``."""
        return self.configs / f"mock-nvml-config-{name}.yaml"


def _progress(message: str) -> None:
    """Building takes minutes the first time; say what is happening."""
    sys.stderr.write(f"[mock-nvml] {message}\n")
    sys.stderr.flush()


def _go(args: list[str], *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "1"}
    return subprocess.run(
        ["go", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900, check=False
    )


def _download(module: str, version: str) -> Path:
    _progress(f"go mod download {module}@{version}")
    proc = _go(["mod", "download", "-json", f"{module}@{version}"])
    info = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if proc.returncode != 0 or "Dir" not in info:
        reason = info.get("Error") or proc.stderr.strip() or f"exit {proc.returncode}"
        raise MockNvmlUnavailable(f"Go module proxy refused {module}@{version}: {reason}")
    return Path(info["Dir"])


def build_mock_nvml() -> MockNvml:
    """The built mock (cached per version); MockNvmlUnavailable when it cannot be had."""
    prebuilt = os.environ.get("DRA_NVLIB_MOCKNVML_DIR")
    if prebuilt:
        root = Path(prebuilt)
        return MockNvml(root / "libnvidia-ml.so.1", root / "configs")
    if shutil.which("go") is None:
        raise MockNvmlUnavailable(
            "the Go toolchain is not installed (needed to build the mock NVML)"
        )
    cache = Path.home() / ".cache" / "dra-nvlib" / f"mocknvml-{MOCK_VERSION}"
    lib = cache / "libnvidia-ml.so.1"
    if lib.exists():
        return MockNvml(lib, cache / "configs")
    src = _download(MOCK_MODULE, MOCK_VERSION)
    work = cache / "src"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    bridge = work / "pkg" / "gpu" / "mocknvml" / "bridge"
    for nested in ("bridge", "engine"):
        # bridge and engine are nested modules (own go.mod) and so not in the root zip.
        target = work / "pkg" / "gpu" / "mocknvml" / nested
        if not (target / "go.mod").exists():
            sub = _download(f"{MOCK_MODULE}/pkg/gpu/mocknvml/{nested}", MOCK_VERSION)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(sub, target)
    for path in work.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    _progress(f"go build -buildmode=c-shared in {bridge} (first run takes a few minutes)")
    proc = _go(["build", "-buildmode=c-shared", "-o", str(lib), "."], cwd=bridge)
    if proc.returncode != 0:
        raise MockNvmlUnavailable(f"building the mock NVML failed: {proc.stderr.strip()[-2000:]}")
    shutil.copytree(work / CONFIG_SUBDIR, cache / "configs", dirs_exist_ok=True)
    _progress(f"built {lib}")
    return MockNvml(lib, cache / "configs")
