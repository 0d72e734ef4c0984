"""What a container needs to use prepared devices, per backend (the CDI content).

:class:`NvmlEdits` (real GPUs): the GPU's ``/dev/nvidiaN`` (MIG: the parent's node plus its
``nvidia-caps`` access nodes) and its DRM nodes with their ``by-path`` links
(:mod:`drm_devices`), the control nodes, and the driver's files, hooks and env as
nvidia-container-toolkit generates them (:mod:`driver_edits`), with
``NVIDIA_VISIBLE_DEVICES=void`` so a legacy NVIDIA runtime hook does not inject every GPU on
top. A required device node that is missing and cannot be created fails the prepare.

:class:`FakeEdits` (fake GPUs): environment variables describing the allocated GPUs, a
``/dev/nvidiaN`` backed by ``/dev/null`` so tools that look for the node find one, and the
fake ``nvidia-smi`` from :mod:`dra_nvlib.nvidia_smi`. Every variable is named for its device
(never for the claim), because CDI merges environment variables by name: a container that gets
devices of several claims must see all of them, as it would on real GPUs. For the same reason
the ``nvidia-smi`` script is the same for every claim and reads the devices from the
per-device ``NVIDIA_FAKE_SMI_*`` variables at run time.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from dra_kubelet_core.cdi import ContainerEdits, DeviceNode, Mount
from dra_kubelet_core.device_nodes import NodeUnavailableError, ensure_char_node, mig_cap_minors
from dra_kubelet_core.errors import ClaimRef, DeviceNodeMissingError
from dra_kubelet_core.host_devices import StandInDeviceNodes
from dra_nvlib import GpuInfo, nvidia_smi_env, nvidia_smi_policy_env, render_env_nvidia_smi_script

from dra_kubelet_plugin.driver_edits import create_symlinks_hook, driver_edits
from dra_kubelet_plugin.driver_files import DriverNotFoundError, driver_version_at, scan_driver_root
from dra_kubelet_plugin.drm_devices import by_path_links, profile_has_graphics, read_drm_devices
from dra_kubelet_plugin.inventory import DeviceType, NodeDevice
from dra_kubelet_plugin.slices import binary_quantity

__all__ = ["EditsProvider", "FakeEdits", "NvmlEdits", "env_name_of"]

log = logging.getLogger(__name__)


class EditsProvider(Protocol):
    """Produces the CDI edits of a claim's devices and the host files they reference."""

    def device_edits(self, claim: ClaimRef, device: NodeDevice) -> ContainerEdits:
        """Edits for one device (applied when a container gets this device)."""
        ...

    def claim_edits(self, claim: ClaimRef, devices: Sequence[NodeDevice]) -> ContainerEdits:
        """Edits every container that gets any of the claim's devices needs; may write
        host files under the provider's state directory (removed by :meth:`release`)."""
        ...

    def sharing_env(self, gpu: GpuInfo) -> tuple[str, ...]:
        """Env showing the GPU's sharing as it is now (compute mode, time-slice) to the
        container's tools, for a claim whose sharing was applied."""
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
        self._nodes = StandInDeviceNodes()

    def device_edits(self, claim: ClaimRef, device: NodeDevice) -> ContainerEdits:  # noqa: ARG002
        """Env vars naming the device (and its ``nvidia-smi`` entry), and its ``/dev/nvidiaN``
        backed by ``/dev/null``."""
        token = env_name_of(device.name)
        memory = device.memory_bytes
        env = (
            f"NVIDIA_FAKE_{token}_UUID={device.uuid}",
            f"NVIDIA_FAKE_{token}_PRODUCT_NAME={device.gpu.product_name}",
            *([f"NVIDIA_FAKE_{token}_MEMORY={binary_quantity(memory)}"] if memory else []),
            nvidia_smi_env(device.gpu, device.mig),
        )
        node = self._nodes.node(f"/dev/nvidia{device.gpu.minor}")
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

    def sharing_env(self, gpu: GpuInfo) -> tuple[str, ...]:
        """The GPU's ``nvidia-smi`` policy entry: the fake ``nvidia-smi`` shows its compute
        mode and time-slice from it."""
        return (nvidia_smi_policy_env(gpu),)

    def release(self, claim_uid: str) -> None:
        """Remove the claim's script."""
        self._files.release(claim_uid)

    def known_claims(self) -> set[str]:
        """Claims with scripts on disk."""
        return self._files.known_claims()


#: Where ``nvidia-cdi-hook`` is looked for below the driver root when no path is configured
#: (the toolkit's and the GPU Operator's install dirs first).
_HOOK_DIRS = (
    "usr/local/nvidia/toolkit",
    "usr/bin",
    "usr/local/bin",
    "usr/sbin",
    "bin",
)
_HOOK_NAME = "nvidia-cdi-hook"
# The kernel parameter naming an extra firmware directory, below /sys.
_FIRMWARE_CLASS_PATH = "module/firmware_class/parameters/path"


class NvmlEdits:
    """CDI content for real GPUs, from the host's ``/dev`` and the driver root.

    The claim-wide part is what nvidia-container-toolkit generates (:mod:`driver_edits`),
    rescanned whenever the driver version below the root changes (a driver upgrade must not
    leave a spec naming the old version's files). Missing ``nvidia-uvm`` and MIG capability
    nodes are created (:mod:`device_nodes`); a required node that cannot be made fails the
    prepare with :class:`DeviceNodeMissingError`, never a spec that silently lacks it.
    """

    def __init__(
        self,
        *,
        driver_root: Path,
        container_driver_root: Path | None = None,
        dev_root: Path = Path("/"),
        proc_root: Path = Path("/proc"),
        cdi_hook_path: str | None = None,
        host_dev_root: Path = Path("/"),
        sys_root: Path = Path("/sys"),
    ) -> None:
        """Describe the driver installed at ``driver_root`` on the host.

        The plugin may see the host's files elsewhere (it runs in a container): driver files
        are looked up below ``container_driver_root`` (default: ``driver_root``) and device
        nodes below ``dev_root``, but the spec names host paths, because the container
        runtime on the host reads it. ``cdi_hook_path`` is the host path of
        ``nvidia-cdi-hook`` (chart value ``nvidiaCDIHookPath``); without it the hook is
        looked for below the driver root, and without a hook the spec mounts each library
        under its SONAME instead (:func:`driver_edits.driver_edits`). ``host_dev_root`` is
        the root of the host's ``/dev`` as the runtime sees it (``/`` on a node; a
        synthetic root in tests): other than ``/``, nodes name it as ``hostPath``.
        ``sys_root`` is where this process sees the host's ``/sys`` (a GPU's DRM nodes are
        found through its PCI function, :mod:`drm_devices`; the GSP firmware also below the
        kernel's ``firmware_class.path``).
        """
        self._driver_root = driver_root
        self._lookup_root = container_driver_root or driver_root
        self._dev_root = dev_root
        self._proc_root = proc_root
        self._cdi_hook_path = cdi_hook_path
        self._host_dev_root = host_dev_root
        self._sys_root = sys_root
        self._driver: tuple[str, ContainerEdits] | None = None

    def _spec_node(self, path: str) -> DeviceNode:
        if self._host_dev_root == Path("/"):
            return DeviceNode(path=path)
        return DeviceNode(path=path, host_path=str(self._host_dev_root / path.lstrip("/")))

    def _node(
        self, claim: ClaimRef, path: str, *, required: bool, device: str
    ) -> DeviceNode | None:
        seen = self._dev_root / path.lstrip("/")
        if seen.exists():
            return self._spec_node(path)
        if required:
            raise DeviceNodeMissingError(
                claim,
                f"device node {path} for {device} does not exist on the host "
                f"(looked at {seen}; is the NVIDIA driver loaded?)",
            )
        return None

    def _created_node(
        self, claim: ClaimRef, path: str, *, module: str, minor: int, device: str
    ) -> DeviceNode:
        try:
            if ensure_char_node(
                self._dev_root,
                path,
                module=module,
                minor=minor,
                proc_devices=self._proc_root / "devices",
            ):
                log.info(
                    "created missing device node",
                    extra={"event": "device_node_created", "path": path, "kernel_module": module},
                )
        except NodeUnavailableError as exc:
            raise DeviceNodeMissingError(claim, f"{device}: {exc}") from exc
        return self._spec_node(path)

    def _mig_caps(self, claim: ClaimRef, device: NodeDevice) -> list[DeviceNode]:
        assert device.mig is not None
        minors_file = self._proc_root / "driver" / "nvidia-caps" / "mig-minors"
        try:
            minors = mig_cap_minors(minors_file.read_text())
        except OSError as exc:
            # NVIDIA #787: an empty list here gave a MIG device without its access nodes.
            raise DeviceNodeMissingError(
                claim,
                f"MIG capability nodes of {device.name}: cannot read {minors_file}: {exc}",
            ) from exc
        nodes = []
        for cap in (
            f"gpu{device.gpu.minor}/gi{device.mig.gi_id}/access",
            f"gpu{device.gpu.minor}/gi{device.mig.gi_id}/ci{device.mig.ci_id}/access",
        ):
            minor = minors.get(cap)
            if minor is None:
                raise DeviceNodeMissingError(
                    claim,
                    f"MIG capability {cap} of {device.name} is not listed in {minors_file}",
                )
            nodes.append(
                self._created_node(
                    claim,
                    f"/dev/nvidia-caps/nvidia-cap{minor}",
                    module="nvidia-caps",
                    minor=minor,
                    device=device.name,
                )
            )
        return nodes

    def device_edits(self, claim: ClaimRef, device: NodeDevice) -> ContainerEdits:
        """The GPU's device node (plus MIG capability nodes), its DRM nodes and the hook
        that recreates their ``/dev/dri/by-path`` links (a MIG device: only when its profile
        has ``gfx``), in the toolkit's order."""
        nodes: list[DeviceNode] = []
        gpu_node = self._node(
            claim, f"/dev/nvidia{device.gpu.minor}", required=True, device=device.name
        )
        assert gpu_node is not None
        nodes.append(gpu_node)
        graphics = True
        if device.type is DeviceType.MIG:
            nodes.extend(self._mig_caps(claim, device))
            profile = device.mig.profile_name if device.mig is not None else ""
            graphics = profile_has_graphics(profile)
        hooks = []
        if graphics:
            drm = read_drm_devices(
                sys_root=self._sys_root, dev_root=self._dev_root, pci_bus_id=device.gpu.pci_bus_id
            )
            nodes.extend(self._spec_node(path) for path in drm.nodes)
            links = by_path_links(drm.links, drm.nodes)
            hook = self.hook_path()
            if links and hook is not None:
                hooks.append(create_symlinks_hook(hook, links))
        return ContainerEdits(device_nodes=tuple(nodes), hooks=tuple(hooks))

    def claim_edits(
        self,
        claim: ClaimRef,
        devices: Sequence[NodeDevice],  # noqa: ARG002 -- the control files are the same for all
    ) -> ContainerEdits:
        """Control nodes, then the driver's files, hooks and env (:mod:`driver_edits`)."""
        nodes = [
            n
            for n in (
                self._node(claim, "/dev/nvidia-modeset", required=False, device="modeset"),
                self._created_node(
                    claim, "/dev/nvidia-uvm", module="nvidia-uvm", minor=0, device="uvm"
                ),
                self._created_node(
                    claim, "/dev/nvidia-uvm-tools", module="nvidia-uvm", minor=1, device="uvm"
                ),
                self._node(claim, "/dev/nvidiactl", required=True, device="control device"),
            )
            if n is not None
        ]
        driver = self._driver_edits(claim)
        return ContainerEdits(
            env=driver.env,
            device_nodes=tuple(nodes),
            mounts=driver.mounts,
            hooks=driver.hooks,
        )

    def hook_path(self) -> str | None:
        """Host path of ``nvidia-cdi-hook``: the configured one, else one below the driver
        root, else ``None``."""
        if self._cdi_hook_path:
            return self._cdi_hook_path
        for directory in _HOOK_DIRS:
            found = self._lookup_root / directory / _HOOK_NAME
            if found.is_file() and os.access(found, os.X_OK):
                return str(self._driver_root / directory / _HOOK_NAME)
        return None

    def _firmware_class_path(self) -> str | None:
        """The kernel's extra firmware directory (``firmware_class.path``), where GKE-style
        hosts keep the GSP firmware; ``None`` when unset or unreadable."""
        try:
            value = (self._sys_root / _FIRMWARE_CLASS_PATH).read_text().strip()
        except OSError:
            return None
        return value or None

    def _driver_edits(self, claim: ClaimRef) -> ContainerEdits:
        try:
            version = driver_version_at(self._lookup_root)
        except DriverNotFoundError as exc:
            raise DeviceNodeMissingError(claim, str(exc)) from exc
        if self._driver is not None and self._driver[0] == version:
            return self._driver[1]
        files = scan_driver_root(self._lookup_root, custom_firmware_dir=self._firmware_class_path())
        hook = self.hook_path()
        if hook is None:
            log.warning(
                "nvidia-cdi-hook not found: CDI specs mount libraries under their SONAMEs "
                "and carry no hooks (no ld.so.cache update); set nvidiaCDIHookPath",
                extra={"event": "cdi_hook_missing", "driver_root": str(self._lookup_root)},
            )
        edits = driver_edits(files, host_root=str(self._driver_root), hook_path=hook)
        if self._driver is not None:
            log.info(
                "driver version changed: CDI mounts rescanned",
                extra={
                    "event": "driver_version_changed",
                    "old": self._driver[0],
                    "new": version,
                },
            )
        self._driver = (version, edits)
        return edits

    def sharing_env(self, gpu: GpuInfo) -> tuple[str, ...]:  # noqa: ARG002
        """None: the real ``nvidia-smi`` asks the driver."""
        return ()

    def release(self, claim_uid: str) -> None:
        """Nothing to remove: the real backend writes no per-claim host files."""

    def known_claims(self) -> set[str]:
        """No per-claim host files."""
        return set()
