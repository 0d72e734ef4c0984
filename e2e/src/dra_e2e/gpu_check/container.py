"""Step 4 of the check: ``nvidia-smi -L`` in a podman container given the prepared claim's
CDI device, listing exactly the prepared GPU.

The image is built here from files of this machine (no registry): busybox, for the fake
backend's ``nvidia-smi`` script, and the host's glibc loader, libraries and ``ldconfig``, which
a real driver's ``nvidia-smi`` and the spec's ldcache hook need (the CDI spec mounts the
driver's own libraries and tools).
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from .claim_round_trip import first_device, running_plugin
from .runner import StepFailed, StepSkipped
from .target import CheckTarget

IMAGE_NAME = "localhost/dra-gpu-check"
# podman 4.3 reads CDI specs from /etc/cdi and /var/run/cdi only.
PODMAN_CDI_ROOT = Path("/var/run/cdi")
BUSYBOX = Path("/bin/busybox")
GLIBC_FILES = (
    "/lib64/ld-linux-x86-64.so.2",
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/lib/x86_64-linux-gnu/libm.so.6",
    "/lib/x86_64-linux-gnu/libdl.so.2",
    "/lib/x86_64-linux-gnu/libpthread.so.0",
    "/lib/x86_64-linux-gnu/librt.so.1",
    # What the real spec's update-ldcache hook runs inside the container.
    "/sbin/ldconfig",
)
PODMAN_RUN = (
    "podman",
    "run",
    "--rm",
    "--runtime",
    "runc",
    "--network",
    "none",
    "--ulimit",
    "nofile=1024:1024",
    "--ulimit",
    "nproc=1024:1024",
)
SMI_LINE = re.compile(r"^GPU \d+: .* \(UUID: (GPU-[0-9a-f-]+)\)$")


def listed_uuids(output: str) -> list[str]:
    """The GPU UUIDs of ``nvidia-smi -L`` output, in order."""
    return [m.group(1) for line in output.splitlines() if (m := SMI_LINE.match(line.strip()))]


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    tar.addfile(info)


def image_tag(files: list[Path]) -> str:
    """The image's tag: a hash of the host files it holds, so a changed glibc or busybox
    gives a new image instead of a stale one."""
    digest = hashlib.sha256()
    for path in files:
        stat = path.stat()
        digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return f"{IMAGE_NAME}:{digest.hexdigest()[:12]}"


def build_image(workdir: Path, timeout_s: float) -> str:
    """Import the check's image into podman (once per content; later runs reuse it)."""
    if not BUSYBOX.is_file():
        raise StepSkipped(f"{BUSYBOX} (busybox-static) is not installed: make prepare")
    present = [Path(p) for p in GLIBC_FILES if Path(p).exists()]
    image = image_tag([BUSYBOX, *present])
    if subprocess.run(["podman", "image", "exists", image], check=False).returncode == 0:
        return image
    rootfs = workdir / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:
        for name in ("bin", "sbin", "usr", "usr/bin", "dev", "proc", "sys", "etc", "tmp"):
            _add_dir(tar, name)
        for name in ("lib64", "lib", "lib/x86_64-linux-gnu", "etc/ld.so.conf.d"):
            _add_dir(tar, name)
        conf = b"include /etc/ld.so.conf.d/*.conf\n"
        info = tarfile.TarInfo("etc/ld.so.conf")
        info.size = len(conf)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(conf))
        tar.add(BUSYBOX, arcname="bin/busybox")
        for applet in ("sh", "cat", "echo", "env"):
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type = tarfile.SYMTYPE
            link.linkname = "busybox"
            tar.addfile(link)
        for path in present:
            tar.add(path.resolve(), arcname=str(path).lstrip("/"))
    subprocess.run(
        ["podman", "import", str(rootfs), image],
        check=True,
        capture_output=True,
        timeout=timeout_s,
    )
    return image


def nvidia_smi_in_container(target: CheckTarget, budget_s: float) -> str:
    """Prepare a claim with specs where podman reads them, run ``nvidia-smi -L`` with its CDI
    devices, unprepare; the container must list the prepared GPU and only it."""
    if shutil.which("podman") is None or shutil.which("runc") is None:
        raise StepSkipped("podman/runc not installed (apt-get install podman runc)")
    device = first_device(target)
    image = build_image(target.workdir, budget_s / 3)
    # The plugin writes into a CDI root of its own: at start it removes the specs of claims
    # it does not know, which in /var/run/cdi may be another driver's. Only this claim's spec
    # is copied where podman reads it, and removed after.
    with running_plugin(target, budget_s) as plugin:
        claim = plugin.prepare(device, timeout_s=budget_s / 6)
        PODMAN_CDI_ROOT.mkdir(parents=True, exist_ok=True)
        copies = [PODMAN_CDI_ROOT / spec.name for spec in claim.spec_files]
        try:
            for spec, copy in zip(claim.spec_files, copies, strict=True):
                shutil.copyfile(spec, copy)
            command = [*PODMAN_RUN]
            for cdi_id in claim.cdi_device_ids:
                command += ["--device", cdi_id]
            command += [image, "nvidia-smi", "-L"]
            try:
                proc = subprocess.run(
                    command, capture_output=True, text=True, timeout=budget_s / 3, check=False
                )
            except subprocess.TimeoutExpired as exc:
                raise StepFailed(f"podman run still running after {budget_s / 3:.0f}s") from exc
        finally:
            for copy in copies:
                copy.unlink(missing_ok=True)
            plugin.unprepare(claim, timeout_s=budget_s / 6)
    if proc.returncode != 0:
        raise StepFailed(f"podman run exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    uuids = listed_uuids(proc.stdout)
    if uuids != [device.uuid]:
        raise StepFailed(f"nvidia-smi -L in the container listed {uuids}, not [{device.uuid}]")
    return f"podman, CDI {', '.join(claim.cdi_device_ids)}: nvidia-smi -L lists {device.uuid}"
