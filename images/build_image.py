#!/usr/bin/env python3
"""Builds the project's container images without a registry, Docker or root.

    python images/build_image.py driver   [--output dist/images/driver.tar]
    python images/build_image.py workload [--output dist/images/workload.tar]
    python images/build_image.py app --dest DIR       (the Dockerfile's build step)

``driver``: the driver image (``docker.io/library/dra-driver-nvidia-gpu-py:<appVersion>``):
Debian 12's CPython 3.11 runtime, ``dash`` and busybox from Debian packages, plus the application
layer that the Dockerfile (``images/Dockerfile``, for users with Docker) also installs: see
``app_stage.py``.

``workload``: a stand-in for the public images the walkthrough and NVIDIA's demo manifests run
(``nvidia/cuda:12.1.0-base-ubuntu22.04``, ``ubuntu:22.04``, the CUDA nbody sample), which no
registry serves here: bash and busybox from Debian packages, enough for their ``bash -c
"nvidia-smi -L; sleep ..."`` commands, and a ``/tmp/sample`` standing in for the nbody sample.
It is named ``docker.io/dra-driver-nvidia-gpu-py/standin-{cuda,ubuntu,cuda-sample}:<their
tags>``, never after the real images; the e2e harness adds the real names inside its own containerd.
On GPU nodes ``nvidia-smi`` comes from the driver (CDI), on fake nodes from this driver's fake
backend (CDI as well); neither image ships it. Clusters that can pull the real
images do not need this one.

Each prints the archive path and its image names, one per line; the archive loads with
``ctr -n k8s.io images import``, ``podman load``, ``docker load`` and ``kind load image-archive``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import app_stage as app
import debian_layer as debian
from dra_oci import PATH_ENV, ImageConfig, LayerBuilder, write_archive

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "deployments" / "helm" / "dra-driver-nvidia-gpu" / "Chart.yaml"
DRIVER_REPOSITORY = "docker.io/library/dra-driver-nvidia-gpu-py"
# The stand-in's own names, and the public images it stands in for. It is never named after
# those: loaded into a user's Docker it would replace their real images. The e2e harness alone
# tags it under the real names, inside its own containerd (the label below, read by
# e2e/src/dra_e2e/image_aliases.py), so that the seed's and NVIDIA's manifests run verbatim there.
STANDS_IN_FOR = {
    "docker.io/dra-driver-nvidia-gpu-py/standin-cuda:12.1.0-base-ubuntu22.04": (
        "docker.io/nvidia/cuda:12.1.0-base-ubuntu22.04"
    ),
    "docker.io/dra-driver-nvidia-gpu-py/standin-ubuntu:22.04": "docker.io/library/ubuntu:22.04",
    # NVIDIA's sharing demos (gpu-test4/5, gpu-test-mps) run `/tmp/sample` of this image.
    "docker.io/dra-driver-nvidia-gpu-py/standin-cuda-sample:nbody-cuda11.6.0-ubuntu18.04": (
        "nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.6.0-ubuntu18.04"
    ),
}
WORKLOAD_NAMES = tuple(STANDS_IN_FOR)
ALIASES_LABEL = "io.dra-e2e.image.aliases"
# Debian's interpreter with the standard library, and a POSIX shell for `kubectl exec` and probes.
# busybox gives `kubectl exec` the usual tools (ls, cat, ps ...) at a megabyte.
DRIVER_PACKAGES = (
    "python3.11-minimal",
    "libpython3.11-stdlib",
    "dash",
    "netbase",
    "busybox-static",
    # C++ runtime of binary wheels (grpcio); python:3.11-slim has it too.
    "libstdc++6",
)
WORKLOAD_PACKAGES = ("bash", "busybox-static", "base-files")


def app_version() -> str:
    """The chart's appVersion: the driver image tag the chart deploys by default."""
    m = re.search(r'^appVersion:\s*"?([^"\s]+)"?\s*$', CHART.read_text(), re.MULTILINE)
    if not m:
        raise SystemExit(f"{CHART}: no appVersion")
    return m.group(1)


def default_cache() -> Path:
    """Where downloaded Debian packages are kept between builds."""
    return Path.home() / ".cache" / "dra-images" / "debs"


def _debian_layer(packages: tuple[str, ...], cache: Path) -> tuple[LayerBuilder, list[str]]:
    names = debian.closure(packages)
    files = debian.fetch(debian.resolve(names), cache)
    layer = LayerBuilder()
    debian.add_base_files(layer)
    debian.add_packages(layer, files)
    return layer, names


def build_driver(output: Path, *, name: str, cache: Path) -> list[str]:
    """Writes the driver image archive; returns its names."""
    base, packages = _debian_layer(DRIVER_PACKAGES, cache)
    # What python3-minimal's postinst and dash's alternatives would have created.
    base.add_symlink("usr/bin/python3", "python3.11")
    base.add_symlink("usr/bin/sh", "dash")
    _add_busybox_applets(base)
    _compile_stdlib(base)
    with tempfile.TemporaryDirectory(prefix="dra-image-") as tmp:
        staged = Path(tmp) / "app"
        scripts = app.stage(REPO, staged, python=sys.executable, platform=app.PYTHON_PLATFORM)
        layer = LayerBuilder()
        layer.add_tree(staged / "site-packages", prefix=app.IMAGE_SITE_PACKAGES)
        layer.add_tree(staged / "bin", prefix="usr/local/bin")
    config = ImageConfig(
        env=(
            PATH_ENV,
            f"PYTHONPATH={app.IMAGE_SITE_PACKAGES}",
            "PYTHONDONTWRITEBYTECODE=1",
            "PYTHONUNBUFFERED=1",
            "LANG=C.UTF-8",
        ),
        cmd=("dra-kubelet-plugin", "--help"),
        labels={
            "org.opencontainers.image.title": "dra-driver-nvidia-gpu-py",
            "org.opencontainers.image.version": name.rsplit(":", 1)[-1],
            "org.opencontainers.image.description": "Python NVIDIA GPU DRA driver (gpu.nvidia.com)",
            "io.dra-driver-nvidia-gpu-py.console-scripts": ",".join(scripts),
        },
    )
    write_archive(
        output,
        names=[name],
        layers=[
            (f"debian packages: {' '.join(packages)}", base),
            ("workspace wheels: " + " ".join(app.APP_DISTRIBUTIONS), layer),
        ],
        config=config,
    )
    return [name]


def _compile_stdlib(layer: LayerBuilder) -> None:
    """Bytecode for the standard library, as Debian's postinst would write it (py3compile).

    The driver's root filesystem is read-only, so bytecode that is not in the image would be
    recompiled at every start.
    """
    with tempfile.TemporaryDirectory(prefix="dra-stdlib-") as tmp:
        root = Path(tmp)
        stdlib = "usr/lib/python3.11/"
        sources = [p for p in layer.paths() if p.startswith(stdlib) and p.endswith(".py")]
        for rel in sources:
            data = layer.file_data(rel)
            if data is None:
                continue
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "compileall",
                "-q",
                "-j",
                "0",
                "--invalidation-mode",
                "unchecked-hash",
                "-s",
                str(root),
                "-x",
                r"/(test|idlelib|lib2to3)/",
                str(root / "usr/lib/python3.11"),
            ],
            check=True,
        )
        for pyc in sorted((root / "usr/lib/python3.11").rglob("*.pyc")):
            layer.add_file(pyc.relative_to(root).as_posix(), pyc.read_bytes())


def _add_busybox_applets(layer: LayerBuilder) -> None:
    """Symlinks for busybox's applets (sleep, cat, ls, ...) that no package already provides."""
    busybox = layer.file_data("usr/bin/busybox")
    if busybox is None:
        raise SystemExit("busybox-static is not in the layer")
    with tempfile.TemporaryDirectory(prefix="dra-busybox-") as tmp:
        exe = Path(tmp) / "busybox"
        exe.write_bytes(busybox)
        exe.chmod(0o755)
        applets = subprocess.run([str(exe), "--list"], capture_output=True, text=True, check=True)
    for applet in applets.stdout.split():
        if f"usr/bin/{applet}" not in layer and f"usr/sbin/{applet}" not in layer:
            layer.add_symlink(f"usr/bin/{applet}", "busybox")


# The CUDA nbody sample's stand-in: no CUDA here, so it shows what a GPU program would be given
# (devices, compute mode, time-slice, the MPS daemon's settings) and runs until stopped.
NBODY_STAND_IN = """#!/bin/bash
echo "nbody stand-in: $*"
nvidia-smi -L
nvidia-smi -q | grep 'Compute Mode'
nvidia-smi compute-policy -l
if [ -n "$CUDA_MPS_PIPE_DIRECTORY" ]; then
  echo "MPS pipe directory: $CUDA_MPS_PIPE_DIRECTORY"
  pct=$(echo get_default_active_thread_percentage | nvidia-cuda-mps-control)
  echo "MPS active thread percentage: $pct"
fi
while :; do sleep 3600; done
"""


def build_workload(output: Path, *, cache: Path) -> list[str]:
    """Writes the stand-in workload image archive; returns its names."""
    base, packages = _debian_layer(WORKLOAD_PACKAGES, cache)
    base.add_symlink("usr/bin/sh", "bash")
    _add_busybox_applets(base)
    base.add_file("tmp/sample", NBODY_STAND_IN.encode(), mode=0o755)
    config = ImageConfig(
        env=(PATH_ENV,),
        cmd=("bash",),
        labels={
            "org.opencontainers.image.description": "stand-in workload image: bash + busybox",
            ALIASES_LABEL: ",".join(STANDS_IN_FOR.values()),
        },
    )
    write_archive(
        output,
        names=list(WORKLOAD_NAMES),
        layers=[(f"debian packages: {' '.join(packages)}", base)],
        config=config,
    )
    return list(WORKLOAD_NAMES)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_driver = sub.add_parser("driver", help="the driver image archive")
    p_driver.add_argument("--output", type=Path, default=REPO / "dist" / "images" / "driver.tar")
    p_driver.add_argument(
        "--name", default=None, help=f"image reference (default {DRIVER_REPOSITORY}:<appVersion>)"
    )
    p_work = sub.add_parser("workload", help="the stand-in workload image archive")
    p_work.add_argument("--output", type=Path, default=REPO / "dist" / "images" / "workload.tar")
    p_app = sub.add_parser("app", help="stage the application (used by images/Dockerfile)")
    p_app.add_argument("--dest", type=Path, required=True)
    p_app.add_argument("--repo", type=Path, default=REPO)
    for p in (p_driver, p_work):
        p.add_argument("--deb-cache", type=Path, default=default_cache())
    args = parser.parse_args(argv)
    try:
        if args.command == "driver":
            name = args.name or f"{DRIVER_REPOSITORY}:{app_version()}"
            names = build_driver(args.output, name=name, cache=args.deb_cache)
        elif args.command == "workload":
            names = build_workload(args.output, cache=args.deb_cache)
        else:
            scripts = app.stage(args.repo, args.dest, python=sys.executable, platform=None)
            print("\n".join(scripts))
            return 0
    except (debian.DebianError, app.StageError) as exc:
        print(f"build_image.py {args.command}: {exc}", file=sys.stderr)
        return 1
    print(args.output)
    print("\n".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
