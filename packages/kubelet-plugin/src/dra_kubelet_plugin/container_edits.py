"""What a container needs to use prepared devices, per backend (the CDI content).

:class:`NvmlEdits` (real GPUs): the GPU's ``/dev/nvidiaN`` (MIG: the parent's node plus its
``nvidia-caps`` access nodes), the control nodes, the driver's user-space libraries and tools
from the driver root, and ``NVIDIA_VISIBLE_DEVICES=void`` so a legacy NVIDIA runtime hook
does not inject every GPU on top. A missing required device node fails the prepare.

:class:`FakeEdits` (fake GPUs): environment variables describing the allocated GPUs, a
``/dev/nvidiaN`` backed by ``/dev/null`` so tools that look for the node find one, and the
fake ``nvidia-smi`` from :mod:`dra_nvlib.nvidia_smi`. Every variable is named for its device
(never for the claim), because CDI merges environment variables by name: a container that gets
devices of several claims must see all of them, as it would on real GPUs. For the same reason
the ``nvidia-smi`` script is the same for every claim and reads the devices from the
per-device ``NVIDIA_FAKE_SMI_*`` variables at run time.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from dra_nvlib import nvidia_smi_env, render_env_nvidia_smi_script

from dra_kubelet_plugin.core.cdi import ContainerEdits, DeviceNode, Mount
from dra_kubelet_plugin.core.errors import ClaimRef, DeviceNodeMissingError
from dra_kubelet_plugin.inventory import DeviceType, NodeDevice
from dra_kubelet_plugin.slices import binary_quantity

__all__ = ["EditsProvider", "FakeEdits", "NvmlEdits", "env_name_of"]


class EditsProvider(Protocol):
    """Produces the CDI edits of a claim's devices and the host files they reference."""

    def device_edits(self, claim: ClaimRef, device: NodeDevice) -> ContainerEdits:
        """Edits for one device (applied when a container gets this device)."""
        ...

    def claim_edits(self, claim: ClaimRef, devices: Sequence[NodeDevice]) -> ContainerEdits:
        """Edits every container that gets any of the claim's devices needs; may write
        host files under the provider's state directory (removed by :meth:`release`)."""
        ...

    def release(self, claim_uid: str) -> None:
        """Remove host files written for the claim (idempotent)."""
        ...

    def known_claims(self) -> set[str]:
        """Claim UIDs that have host files (for cleanup of leftovers)."""
        ...


def env_name_of(device_name: str) -> str:
    """``gpu-0-mig-1g10gb-19-0`` -> ``GPU_0_MIG_1G10GB_19_0`` (an env-var-safe token)."""
    return re.sub(r"[^A-Z0-9]", "_", device_name.upper())


class _ClaimFiles:
    """Per-claim host files below ``root/<claimUID>/``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def dir_for(self, claim_uid: str) -> Path:
        return self.root / claim_uid

    def release(self, claim_uid: str) -> None:
        shutil.rmtree(self.dir_for(claim_uid), ignore_errors=True)

    def known_claims(self) -> set[str]:
        try:
            return {p.name for p in self.root.iterdir() if p.is_dir()}
        except FileNotFoundError:
            return set()


class FakeEdits:
    """CDI content for the fake backend (no real device nodes exist)."""

    def __init__(self, state_dir: Path, *, smi_container_path: str = "/usr/bin/nvidia-smi") -> None:
        """Write per-claim fake ``nvidia-smi`` scripts below ``state_dir``."""
        self._files = _ClaimFiles(state_dir)
        self._smi_path = smi_container_path

    def device_edits(self, claim: ClaimRef, device: NodeDevice) -> ContainerEdits:  # noqa: ARG002
        """Env vars naming the device (and its ``nvidia-smi`` entry), and its ``/dev/nvidiaN``
        backed by ``/dev/null``."""
        token = env_name_of(device.name)
        env = (
            f"NVIDIA_FAKE_{token}_UUID={device.uuid}",
            f"NVIDIA_FAKE_{token}_PRODUCT_NAME={device.gpu.product_name}",
            f"NVIDIA_FAKE_{token}_MEMORY={binary_quantity(device.memory_bytes)}",
            nvidia_smi_env(device.gpu, device.mig),
        )
        node = DeviceNode(path=f"/dev/nvidia{device.gpu.minor}", host_path="/dev/null")
        return ContainerEdits(env=env, device_nodes=(node,))

    def claim_edits(
        self,
        claim: ClaimRef,
        devices: Sequence[NodeDevice],  # noqa: ARG002 -- the script reads the devices from env
    ) -> ContainerEdits:
        """The fake ``nvidia-smi``, which lists the devices of the container's device edits.

        The script's content is the same for every claim, so when several claims mount it at
        the same path the one that wins still lists the devices of all of them.
        """
        directory = self._files.dir_for(claim.uid)
        directory.mkdir(parents=True, exist_ok=True)
        script = directory / "nvidia-smi"
        tmp = directory / ".nvidia-smi.tmp"
        tmp.write_text(render_env_nvidia_smi_script())
        tmp.chmod(0o755)
        os.replace(tmp, script)
        mount = Mount(
            host_path=str(script),
            container_path=self._smi_path,
            options=("ro", "nosuid", "nodev", "bind"),
        )
        return ContainerEdits(mounts=(mount,))

    def release(self, claim_uid: str) -> None:
        """Remove the claim's script."""
        self._files.release(claim_uid)

    def known_claims(self) -> set[str]:
        """Claims with scripts on disk."""
        return self._files.known_claims()


#: Driver user-space files mounted into containers (globbed below the driver root).
_DRIVER_LIBRARIES = (
    "libcuda.so.*",
    "libcudadebugger.so.*",
    "libnvidia-ml.so.*",
    "libnvidia-ptxjitcompiler.so.*",
    "libnvidia-nvvm.so.*",
    "libnvidia-gpucomp.so.*",
    "libnvidia-allocator.so.*",
    "libnvidia-cfg.so.*",
    "libnvidia-opencl.so.*",
    "libnvidia-pkcs11.so.*",
    "libnvidia-pkcs11-openssl3.so.*",
    "libnvidia-nscq.so.*",
)
_LIBRARY_DIRS = ("usr/lib/x86_64-linux-gnu", "usr/lib64", "usr/lib/aarch64-linux-gnu", "usr/lib")
_DRIVER_BINARIES = (
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
)
_BIN_DIRS = ("usr/bin", "usr/local/bin", "bin")


class NvmlEdits:
    """CDI content for real GPUs, from the host's ``/dev`` and the driver root."""

    def __init__(
        self,
        *,
        driver_root: Path,
        container_driver_root: Path | None = None,
        dev_root: Path = Path("/"),
        proc_root: Path = Path("/proc"),
    ) -> None:
        """Describe the driver installed at ``driver_root`` on the host.

        The plugin may see the host's files elsewhere (it runs in a container): driver files
        are looked up below ``container_driver_root`` (default: ``driver_root``) and device
        nodes below ``dev_root``, but the spec names host paths, because the container
        runtime on the host reads it.
        """
        self._driver_root = driver_root
        self._lookup_root = container_driver_root or driver_root
        self._dev_root = dev_root
        self._proc_root = proc_root
        self._driver_mounts: tuple[Mount, ...] | None = None

    def _node(
        self, claim: ClaimRef, path: str, *, required: bool, device: str
    ) -> DeviceNode | None:
        seen = self._dev_root / path.lstrip("/")
        if seen.exists():
            return DeviceNode(path=path)
        if required:
            raise DeviceNodeMissingError(
                claim,
                f"device node {path} for {device} does not exist on the host "
                f"(looked at {seen}; is the NVIDIA driver loaded?)",
            )
        return None

    def _mig_caps(self, device: NodeDevice) -> list[str]:
        assert device.mig is not None
        minors = self._proc_root / "driver" / "nvidia-caps" / "mig-minors"
        wanted = {
            f"gpu{device.gpu.minor}/gi{device.mig.gi_id}/access",
            f"gpu{device.gpu.minor}/gi{device.mig.gi_id}/ci{device.mig.ci_id}/access",
        }
        paths: list[str] = []
        try:
            for line in minors.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] in wanted:
                    paths.append(f"/dev/nvidia-caps/nvidia-cap{parts[1]}")
        except OSError:
            return []
        return paths

    def device_edits(self, claim: ClaimRef, device: NodeDevice) -> ContainerEdits:
        """The GPU's device node (plus MIG capability nodes)."""
        nodes: list[DeviceNode] = []
        gpu_node = self._node(
            claim, f"/dev/nvidia{device.gpu.minor}", required=True, device=device.name
        )
        assert gpu_node is not None
        nodes.append(gpu_node)
        if device.type is DeviceType.MIG:
            for cap in self._mig_caps(device):
                node = self._node(claim, cap, required=True, device=device.name)
                assert node is not None
                nodes.append(node)
        return ContainerEdits(device_nodes=tuple(nodes))

    def claim_edits(
        self,
        claim: ClaimRef,
        devices: Sequence[NodeDevice],  # noqa: ARG002 -- the control files are the same for all
    ) -> ContainerEdits:
        """Control nodes, driver libraries and tools, ``NVIDIA_VISIBLE_DEVICES=void``."""
        nodes = [
            n
            for n in (
                self._node(claim, "/dev/nvidiactl", required=True, device="control device"),
                self._node(claim, "/dev/nvidia-uvm", required=False, device="uvm"),
                self._node(claim, "/dev/nvidia-uvm-tools", required=False, device="uvm tools"),
            )
            if n is not None
        ]
        return ContainerEdits(
            env=("NVIDIA_VISIBLE_DEVICES=void",),
            device_nodes=tuple(nodes),
            mounts=self._driver_files(),
        )

    def _driver_files(self) -> tuple[Mount, ...]:
        if self._driver_mounts is not None:
            return self._driver_mounts
        mounts: list[Mount] = []
        root = self._lookup_root

        def host(found: Path) -> str:
            return str(self._driver_root / found.relative_to(root))

        for lib_dir in _LIBRARY_DIRS:
            base = root / lib_dir
            for pattern in _DRIVER_LIBRARIES:
                found = sorted(base.glob(pattern))
                files = {f.resolve(): f for f in found if not f.is_symlink() and f.is_file()}
                for real in files.values():
                    container = "/" + str(real.relative_to(root))
                    mounts.append(Mount(host_path=host(real), container_path=container))
                # Programs open the SONAME (libcuda.so.1), a symlink the installer created;
                # without an ldconfig hook in the container, mount the file under that name.
                for link in (f for f in found if f.is_symlink()):
                    real_file = files.get(link.resolve())
                    if real_file is not None:
                        container = "/" + str(link.relative_to(root))
                        mounts.append(Mount(host_path=host(real_file), container_path=container))
        for bin_dir in _BIN_DIRS:
            for name in _DRIVER_BINARIES:
                tool = root / bin_dir / name
                if tool.is_file() and not any(
                    m.container_path.endswith("/" + name) for m in mounts
                ):
                    mounts.append(Mount(host_path=host(tool), container_path=f"/usr/bin/{name}"))
        self._driver_mounts = tuple(mounts)
        return self._driver_mounts

    def release(self, claim_uid: str) -> None:
        """Nothing to remove: the real backend writes no per-claim host files."""

    def known_claims(self) -> set[str]:
        """No per-claim host files."""
        return set()
