"""Container images without a registry: OCI archives built locally and imported.

``write_oci_archive`` packs Debian's static busybox into a one-layer image archive
(written by :mod:`dra_oci`, which also writes the driver image), so the
pause image and a test image exist without any registry. ``import_image`` loads any OCI or Docker
archive into a node's containerd ``k8s.io`` namespace, where the kubelet finds it;
pods must then use ``imagePullPolicy: IfNotPresent`` (or ``Never``) and a tag
other than ``latest``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import dra_oci
from dra_oci import PATH_ENV, LayerBuilder

from dra_e2e import image_cache, preflight
from dra_e2e.checkout import REPO
from dra_e2e.errors import ImageError

#: Builds this project's driver image and the walkthrough's workload image.
BUILD_SCRIPT = REPO / "images" / "build_image.py"

# The sandbox ("pause") container only has to exist and exit on SIGTERM/SIGINT.
PAUSE_COMMAND = ("/bin/sh", "-c", "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done")


@dataclass(frozen=True)
class ImageSpec:
    """What goes into a locally built image besides busybox itself."""

    reference: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ("/bin/sh",)
    extra_files: tuple[tuple[str, bytes, int], ...] = ()


def _busybox_applets(busybox: Path) -> list[str]:
    out = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True)
    return sorted({a for a in out.stdout.split() if a and "/" not in a and a != "busybox"})


def busybox_layer(extra_files: Sequence[tuple[str, bytes, int]] = ()) -> LayerBuilder:
    """A layer: /bin/busybox, its applet symlinks, /etc basics, then ``extra_files``.

    The extra files go in before the defaults, so that one of them (an ``/etc/passwd``, say)
    takes the place of the default: the layer keeps the first entry of a path.
    """
    busybox = Path(preflight.require("busybox"))
    layer = LayerBuilder()
    for directory in ("bin", "etc", "tmp", "root", "var", "usr", "proc", "sys", "dev"):
        layer.add_dir(directory, mode=0o1777 if directory == "tmp" else 0o755)
    for path, data, mode in extra_files:
        layer.add_file(path, data, mode=mode)
    layer.add_file("bin/busybox", busybox.read_bytes(), mode=0o755)
    for applet in _busybox_applets(busybox):
        layer.add_symlink(f"bin/{applet}", "busybox")
    layer.add_file(
        "etc/passwd",
        b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
    )
    layer.add_file("etc/group", b"root:x:0:\nnogroup:x:65534:\n")
    return layer


def write_oci_archive(path: Path, spec: ImageSpec, *, layer: LayerBuilder | None = None) -> Path:
    """Write ``spec`` as an image archive (see :mod:`dra_oci`) to ``path``.

    ``layer`` defaults to :func:`busybox_layer` with the spec's extra files.
    """
    dra_oci.write_archive(
        path,
        names=[spec.reference],
        layers=[("dra-e2e busybox image", layer or busybox_layer(spec.extra_files))],
        config=dra_oci.ImageConfig(
            env=(PATH_ENV,), entrypoint=spec.entrypoint, cmd=spec.cmd, workdir="/"
        ),
    )
    return path


def build_project_image(
    kind: str, out: Path, *, capture: bool = True, progress: Callable[[str], None] | None = None
) -> Path:
    """``images/build_image.py KIND --output OUT`` (``driver`` or ``workload``); returns ``out``.

    The archive comes from the content-keyed cache (:mod:`dra_e2e.image_cache`) when an earlier
    build had the same inputs, and is built into it otherwise; outside a git checkout it is
    built straight into ``out``. With ``capture`` the build's output is kept for the error;
    without, it goes to the terminal. ``progress`` hears whether the cache was used.
    """
    try:
        key = image_cache.current_key(kind, REPO)
    except image_cache.NotACheckoutError as exc:
        if progress is not None:
            progress(f"[dra-e2e] {exc}; building {kind} without the cache")
        _run_build_script(kind, out, capture=capture)
        return out
    built: list[Path] = []

    def build(path: Path) -> None:
        _run_build_script(kind, path, capture=capture)
        built.append(path)

    archive = image_cache.cached_archive(key, build)
    if progress is not None:
        how = "built into" if built else "reused from"
        progress(f"[dra-e2e] {kind} image {how} the image cache: {archive}")
    shutil.copyfile(archive, out)
    return out


def _run_build_script(kind: str, out: Path, *, capture: bool) -> None:
    proc = subprocess.run(
        [sys.executable, str(BUILD_SCRIPT), kind, "--output", str(out)],
        capture_output=capture,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        detail = f":\n{proc.stderr.strip()}" if capture else " (its output is above)"
        raise ImageError(kind, f"images/build_image.py {kind} exited {proc.returncode}{detail}")


def import_image(archive: Path, *, ctr: Path, containerd_socket: Path) -> list[str]:
    """Import an OCI/Docker image archive into containerd's ``k8s.io`` namespace.

    Returns the image references containerd reports for the archive.
    """
    if not archive.is_file():
        raise ImageError(str(archive), "archive does not exist")
    proc = subprocess.run(
        [str(ctr), "--address", str(containerd_socket), "--namespace", "k8s.io",
         "images", "import", "--local", "--no-unpack=false", str(archive)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ImageError(str(archive), f"ctr images import failed: {proc.stderr.strip()}")
    refs = []
    for line in proc.stdout.splitlines():
        # ctr prints "unpacking <ref> (sha256:...)...done" per image.
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "unpacking":
            refs.append(parts[1])
    return refs


def list_images(*, ctr: Path, containerd_socket: Path) -> list[str]:
    """References of the images in a node's ``k8s.io`` namespace."""
    proc = subprocess.run(
        [str(ctr), "--address", str(containerd_socket), "--namespace", "k8s.io",
         "images", "list", "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise ImageError("*", f"ctr images list failed: {proc.stderr.strip()}")
    return [line for line in proc.stdout.splitlines() if line]
