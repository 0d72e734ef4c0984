"""NVIDIA's container toolkit as the reference for this driver's CDI specs (``gobuild/toolkit``).

``nvidia-ctk`` (``cdi generate``) and ``nvidia-cdi-hook`` (the OCI hooks our specs name) are
built from the module ``github.com/NVIDIA/nvidia-container-toolkit`` (Go module proxy) into
the binary cache like the cluster components, once per version and build inputs. The
toolkit reaches NVML through go-nvml, which needs cgo, so this is the one cgo build.

:func:`generate_spec` runs ``nvidia-ctk cdi generate`` in ``nvml`` mode against a driver root;
NVML is whatever ``libnvidia-ml.so.1`` the environment lets it load (the tests point it at
the go-nvml mock library of ``dra_nvlib.mock_nvml_build``). A few inputs the toolkit reads at
absolute host paths, whatever its ``--driver-root`` (a GPU's DRM nodes from
``/sys/bus/pci/devices/<bus>/drm``, the MIG capability minors from
``/proc/driver/nvidia-caps``): ``binds`` mounts synthetic ones over those paths, in a private
mount namespace of the one ``nvidia-ctk`` process (``unshare``), so the host sees nothing.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_e2e.build import GOBUILD_DIR, GoComponent, Progress, build_component
from dra_e2e.errors import E2EError
from dra_e2e.versions import NVIDIA_CONTAINER_TOOLKIT_VERSION

_MODULE = "github.com/NVIDIA/nvidia-container-toolkit"
TOOLKIT = GoComponent(
    name="nvidia-container-toolkit",
    version=NVIDIA_CONTAINER_TOOLKIT_VERSION,
    packages=(f"{_MODULE}/cmd/nvidia-ctk", f"{_MODULE}/cmd/nvidia-cdi-hook"),
    outputs=("nvidia-ctk", "nvidia-cdi-hook"),
    source_dir=GOBUILD_DIR / "toolkit",
    cgo=True,
)


class ToolkitError(E2EError):
    """``nvidia-ctk`` failed; the message holds its output."""


@dataclass(frozen=True)
class Toolkit:
    """The built toolkit binaries."""

    directory: Path

    @property
    def nvidia_ctk(self) -> Path:
        """The ``nvidia-ctk`` CLI."""
        return self.directory / "nvidia-ctk"

    @property
    def nvidia_cdi_hook(self) -> Path:
        """The ``nvidia-cdi-hook`` program CDI hooks run."""
        return self.directory / "nvidia-cdi-hook"


def build_toolkit(*, progress: Progress, root: Path | None = None) -> Toolkit:
    """The toolkit from the cache, built first when missing (about a minute cold)."""
    return Toolkit(build_component(TOOLKIT, progress=progress, root=root))


def generate_spec(
    toolkit: Toolkit,
    *,
    driver_root: Path,
    dev_root: Path,
    hook_path: str,
    env: Mapping[str, str],
    binds: Mapping[str, Path] | None = None,
    timeout_s: float = 120,
) -> dict[str, Any]:
    """``nvidia-ctk cdi generate --mode nvml`` for ``driver_root``: the spec as JSON.

    ``binds``: host path -> the directory bind-mounted over it for this run (needs root).
    """
    with tempfile.TemporaryDirectory(prefix="dra-ctk-") as tmp:
        out = Path(tmp) / "spec.json"
        cmd = [
            str(toolkit.nvidia_ctk),
            "cdi",
            "generate",
            "--mode=nvml",
            "--format=json",
            f"--driver-root={driver_root}",
            f"--dev-root={dev_root}",
            f"--nvidia-cdi-hook-path={hook_path}",
            f"--output={out}",
        ]
        if binds:
            cmd = [*_in_mount_namespace(binds), *cmd]
        proc = subprocess.run(
            cmd, env=dict(env), capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if proc.returncode != 0 or not out.is_file():
            raise ToolkitError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        spec: dict[str, Any] = json.loads(out.read_text())
        return spec


# Runs "$@" after bind-mounting each (source, target) pair given before "--".
_BIND_THEN_EXEC = (
    'while [ "$1" != -- ]; do mount --bind "$1" "$2" || exit 97; shift 2; done; shift; exec "$@"'
)


def _in_mount_namespace(binds: Mapping[str, Path]) -> list[str]:
    pairs = [str(part) for target, source in binds.items() for part in (source, target)]
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        _BIND_THEN_EXEC,
        "sh",
        *pairs,
        "--",
    ]
