#!/usr/bin/env python3
"""Builds the project's container images without a registry, Docker or root.

    python images/build_image.py driver   [--output dist/images/driver.tar]
                                          [--platform linux/amd64,linux/arm64]
    python images/build_image.py workload [--output dist/images/workload.tar]
    python images/build_image.py app --dest DIR [--platform linux/arm64]
                                                      (the Dockerfile's build step)

``driver``: the driver image (``docker.io/library/dra-driver-nvidia-gpu-py:<appVersion>``) for
linux/amd64 and linux/arm64 (GB200's Grace CPUs) in one archive, an OCI image index: per
platform Debian 12's CPython 3.11 runtime, ``dash`` and busybox from that architecture's Debian
packages, plus the application layer that the Dockerfile (``images/Dockerfile``, for users with
Docker) also installs, with that architecture's binary wheels at the versions in ``uv.lock``:
see ``app_stage.py``. ``--platform`` with one platform writes a plain single-platform image.

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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import app_stage as app
import debian_layer as debian
from dra_oci import (
    PATH_ENV,
    ImageConfig,
    LayerBuilder,
    PlatformImage,
    write_archive,
    write_index_archive,
)

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
    # NVIDIA's fabric-manager-partitioning demo pod (`sleep infinity`).
    "docker.io/dra-driver-nvidia-gpu-py/standin-cuda:12.0.0-base-ubuntu22.04": (
        "docker.io/nvidia/cuda:12.0.0-base-ubuntu22.04"
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


@dataclass(frozen=True)
class Platform:
    """A platform the driver image is built for. Debian and OCI name these architectures alike."""

    name: str
    architecture: str
    variant: str = ""


PLATFORMS = {
    p.name: p for p in (Platform("linux/amd64", "amd64"), Platform("linux/arm64", "arm64", "v8"))
}
DEFAULT_PLATFORMS = ",".join(PLATFORMS)


def parse_platforms(text: str) -> list[Platform]:
    """``linux/amd64,linux/arm64`` as platforms, each once, in the order given."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PLATFORMS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"--platform {text!r}: expected a comma-separated list of {DEFAULT_PLATFORMS}"
        )
    return [PLATFORMS[n] for n in dict.fromkeys(names)]


def app_version() -> str:
    """The chart's appVersion: the driver image tag the chart deploys by default."""
    m = re.search(r'^appVersion:\s*"?([^"\s]+)"?\s*$', CHART.read_text(), re.MULTILINE)
    if not m:
        raise SystemExit(f"{CHART}: no appVersion")
    return m.group(1)


def default_cache() -> Path:
    """Where downloaded Debian packages are kept between builds."""
    return Path.home() / ".cache" / "dra-images" / "debs"


def _debian_layer(
    packages: tuple[str, ...], cache: Path, apt: debian.Apt = debian.HOST_APT
) -> tuple[LayerBuilder, list[debian.Deb]]:
    names = debian.closure(packages, apt=apt)
    debs = debian.resolve(names, apt=apt)
    files = debian.fetch(debs, cache, apt=apt)
    layer = LayerBuilder()
    debian.add_base_files(layer)
    debian.add_packages(layer, files)
    return layer, debs


def apt_state(cache: Path, architecture: str) -> Path:
    """Where another architecture's apt lists are kept: beside its packages in the cache."""
    return cache / "apt" / architecture


def build_driver(
    output: Path,
    *,
    name: str,
    cache: Path,
    platforms: Sequence[Platform] = tuple(PLATFORMS.values()),
) -> list[str]:
    """Writes the driver image archive for ``platforms`` (an image index for several, a plain
    image for one); returns its names."""
    # busybox's applet list comes from the host's busybox of the same Debian version: a foreign
    # architecture's binary cannot run here.
    host_busybox = _busybox(cache)
    images: list[PlatformImage] = []
    for platform in platforms:
        apt = debian.apt_for(platform.architecture, apt_state(cache, platform.architecture))
        base, debs = _debian_layer(DRIVER_PACKAGES, cache, apt)
        busybox = next(d for d in debs if d.package == "busybox-static")
        if _version(busybox) != _version(host_busybox[0]):
            raise debian.DebianError(
                f"{busybox.filename}: not the host's busybox-static version "
                f"({host_busybox[0].filename}); run `apt-get update`"
            )
        # What python3-minimal's postinst and dash's alternatives would have created.
        base.add_symlink("usr/bin/python3", "python3.11")
        base.add_symlink("usr/bin/sh", "dash")
        _add_busybox_applets(base, host_busybox[1])
        _compile_stdlib(base)
        images.append(_driver_image(platform, base, debs, name))
    if len(images) == 1:
        write_archive(
            output,
            names=[name],
            layers=images[0].layers,
            config=images[0].config,
            architecture=images[0].architecture,
        )
    else:
        write_index_archive(output, names=[name], images=images)
    return [name]


def _version(deb: debian.Deb) -> str:
    return deb.filename.split("_")[1]


def _driver_image(
    platform: Platform, base: LayerBuilder, debs: Sequence[debian.Deb], name: str
) -> PlatformImage:
    with tempfile.TemporaryDirectory(prefix="dra-image-") as tmp:
        staged = Path(tmp) / "app"
        wheels = app.WHEEL_PLATFORMS[platform.architecture]
        scripts = app.stage(REPO, staged, python=sys.executable, platform=wheels)
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
    packages = " ".join(d.package for d in debs)
    return PlatformImage(
        platform.architecture,
        [
            (f"debian packages: {packages}", base),
            ("workspace wheels: " + " ".join(app.APP_DISTRIBUTIONS), layer),
        ],
        config,
        platform.variant,
    )


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


def _busybox(cache: Path) -> tuple[debian.Deb, list[str]]:
    """The host architecture's busybox-static package and its applets (sleep, cat, ls, ...)."""
    layer, debs = _debian_layer(("busybox-static",), cache)
    busybox = layer.file_data("usr/bin/busybox")
    if busybox is None:
        raise debian.DebianError("busybox-static ships no usr/bin/busybox")
    with tempfile.TemporaryDirectory(prefix="dra-busybox-") as tmp:
        exe = Path(tmp) / "busybox"
        exe.write_bytes(busybox)
        exe.chmod(0o755)
        applets = subprocess.run([str(exe), "--list"], capture_output=True, text=True, check=True)
    return next(d for d in debs if d.package == "busybox-static"), applets.stdout.split()


def _add_busybox_applets(layer: LayerBuilder, applets: Sequence[str]) -> None:
    """Symlinks for busybox's applets that no package already provides."""
    if "usr/bin/busybox" not in layer:
        raise debian.DebianError("busybox-static is not in the layer")
    for applet in applets:
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
    base, debs = _debian_layer(WORKLOAD_PACKAGES, cache)
    packages = [d.package for d in debs]
    base.add_symlink("usr/bin/sh", "bash")
    _add_busybox_applets(base, _busybox(cache)[1])
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
    p_driver.add_argument(
        "--platform",
        type=parse_platforms,
        default=parse_platforms(DEFAULT_PLATFORMS),
        help=f"comma-separated platforms (default {DEFAULT_PLATFORMS})",
    )
    p_work = sub.add_parser("workload", help="the stand-in workload image archive")
    p_work.add_argument("--output", type=Path, default=REPO / "dist" / "images" / "workload.tar")
    p_app = sub.add_parser("app", help="stage the application (used by images/Dockerfile)")
    p_app.add_argument("--dest", type=Path, required=True)
    p_app.add_argument("--repo", type=Path, default=REPO)
    p_app.add_argument(
        "--platform",
        choices=sorted(PLATFORMS),
        default=None,
        help="install binary wheels for this platform (default: the running interpreter's)",
    )
    for p in (p_driver, p_work):
        p.add_argument("--deb-cache", type=Path, default=default_cache())
    args = parser.parse_args(argv)
    try:
        if args.command == "driver":
            name = args.name or f"{DRIVER_REPOSITORY}:{app_version()}"
            names = build_driver(
                args.output, name=name, cache=args.deb_cache, platforms=args.platform
            )
        elif args.command == "workload":
            names = build_workload(args.output, cache=args.deb_cache)
        else:
            wheels = (
                app.WHEEL_PLATFORMS[PLATFORMS[args.platform].architecture]
                if args.platform
                else None
            )
            scripts = app.stage(args.repo, args.dest, python=sys.executable, platform=wheels)
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
