"""Stages the driver's Python packages as they are laid out inside the image.

Both image builds use this, so the Dockerfile and the registry-free build carry the same
application content:

- ``<dest>/site-packages``: the workspace distributions (all but the e2e harness and the archive
  writer, which only build and test: ``dra-kubelet-plugin``, ``dra-computedomain``,
  ``dra-controller``, ``kubectl-dra`` and their libraries) built
  as wheels by ``uv build``, and their third-party dependencies at the versions pinned in
  ``uv.lock`` (``uv export`` constraints), installed for CPython 3.11 (manylinux x86_64 or
  aarch64 binary wheels, :data:`WHEEL_PLATFORMS`, when the build is for another machine than
  the one running it), compiled to bytecode;
- ``<dest>/bin``: one launcher per console script of the workspace distributions, run by
  whatever ``python3`` is first on PATH (the image's only one).

In the image, ``site-packages`` is ``/opt/dra/site-packages`` (on ``PYTHONPATH``) and the
launchers are in ``/usr/local/bin``.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

# What the image runs: the kubelet plugin, the compute-domain controller, daemon and plugin,
# the cluster services (allocation controller, webhook) and the `kubectl dra` tooling. Their
# workspace dependencies (dra-api-types, dra-nvlib, dra-kube-client, dra-kubelet-core,
# dra-sharing, dra-cel, dra-allocator) come along through their requirements.
APP_DISTRIBUTIONS = ("dra-kubelet-plugin", "dra-computedomain", "dra-controller", "kubectl-dra")
# Build-time tools stay out of the image: the test harness and the archive writer (dra-oci).
EXCLUDED_WHEELS = ("dra_e2e-", "dra_oci-")
IMAGE_SITE_PACKAGES = "/opt/dra/site-packages"
PYTHON_VERSION = "3.11"
# uv's --python-platform per image architecture: glibc 2.36 is Debian 12's, the base of both
# images. Binary wheels (grpcio, pydantic-core, ...) are picked for the image, not the builder.
WHEEL_PLATFORMS = {"amd64": "x86_64-manylinux_2_36", "arm64": "aarch64-manylinux_2_36"}


class StageError(RuntimeError):
    """A uv step failed while staging the application."""


def stage(
    repo: Path, dest: Path, *, python: str, platform: str | None, uv: str = "uv"
) -> list[str]:
    """Builds and installs the application into ``dest``; returns the console script names.

    ``python`` is a CPython 3.11 used to compile bytecode (the image's own interpreter in the
    Dockerfile, the host's here; 3.11 bytecode is the same for every 3.11 patch release).
    ``platform`` (a uv ``--python-platform``) selects binary wheels for another system than the
    one running the build; None installs for ``python`` itself (the Dockerfile's case).
    """
    if dest.exists():
        shutil.rmtree(dest)
    site = dest / "site-packages"
    with tempfile.TemporaryDirectory(prefix="dra-stage-") as tmp_name:
        tmp = Path(tmp_name)
        wheels = tmp / "wheels"
        _run([uv, "build", "--all-packages", "--wheel", "--quiet", "-o", str(wheels)], cwd=repo)
        constraints = tmp / "constraints.txt"
        _run(
            [
                uv,
                "export",
                "--frozen",
                "--all-packages",
                "--no-dev",
                "--no-emit-workspace",
                "--no-hashes",
                "--no-header",
                "--quiet",
                "-o",
                str(constraints),
            ],
            cwd=repo,
        )
        for dist in APP_DISTRIBUTIONS:
            _wheel_for(wheels, dist)
        # Every workspace library goes in by file, so a workspace dependency is never looked up
        # on PyPI; only the build-time tools stay out.
        wanted = [w for w in sorted(wheels.glob("*.whl")) if not w.name.startswith(EXCLUDED_WHEELS)]
        _run(
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--target",
                str(site),
                "--python",
                python,
                *(
                    ["--python-version", PYTHON_VERSION, "--python-platform", platform]
                    if platform
                    else []
                ),
                "-c",
                str(constraints),
                *[str(w) for w in wanted],
            ],
            cwd=repo,
        )
    # Scripts uv wrote point at the build machine's interpreter; the image gets its own.
    shutil.rmtree(site / "bin", ignore_errors=True)
    scripts = _write_launchers(
        site, dest / "bin", workspace={w.name.split("-", 1)[0] for w in wanted}
    )
    _run(
        [
            python,
            "-m",
            "compileall",
            "-q",
            "-j",
            "0",
            "--invalidation-mode",
            "unchecked-hash",
            "-d",
            IMAGE_SITE_PACKAGES,
            str(site),
        ],
        cwd=repo,
    )
    return scripts


def _wheel_for(wheels: Path, dist: str) -> Path:
    found = sorted(wheels.glob(dist.replace("-", "_") + "-*.whl"))
    if not found:
        raise StageError(f"uv build produced no wheel for {dist} in {wheels}")
    return found[-1]


def _write_launchers(site: Path, bin_dir: Path, *, workspace: set[str]) -> list[str]:
    """One launcher per console script of the workspace distributions (``workspace``: their
    wheel names, e.g. ``kubectl_dra``); third-party scripts stay out."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    names: list[str] = []
    for entry_points in sorted(site.glob("*.dist-info/entry_points.txt")):
        if entry_points.parent.name.split("-", 1)[0] not in workspace:
            continue
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        parser.read(entry_points)
        if not parser.has_section("console_scripts"):
            continue
        for name, target in parser.items("console_scripts"):
            module, _, func = target.strip().partition(":")
            launcher = bin_dir / name
            launcher.write_text(
                "#!/usr/bin/env python3\n"
                "import sys\n"
                f"from {module} import {func.split('.')[0]}\n"
                f"sys.exit({func}())\n"
            )
            launcher.chmod(0o755)
            names.append(name)
    return sorted(names)


def _run(cmd: Sequence[str], *, cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        command = " ".join(cmd[:3])
        raise StageError(f"{command} ... failed ({proc.returncode}):\n{proc.stderr.strip()}")
