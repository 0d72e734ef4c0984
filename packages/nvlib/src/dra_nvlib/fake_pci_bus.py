"""A fake host for passthrough: a sysfs tree with the kernel's layout, and the kernel's part
in binding, so unbind/bind are observable in files without hardware.

Layout below ``root`` (the same paths :mod:`dra_nvlib.sysfs` reads on a real host)::

    sys/devices/<pcieRoot>/<bdf>/{vendor,device,class,numa_node,driver_override}
    sys/devices/<pcieRoot>/<bdf>/driver -> ../../../bus/pci/drivers/<driver>
    sys/devices/<pcieRoot>/<bdf>/iommu_group -> ../../../kernel/iommu_groups/<group>
    sys/devices/<pcieRoot>/<bdf>/vfio-dev/vfio<N>      while vfio-pci holds it (iommufd)
    sys/bus/pci/devices/<bdf> -> ../../../devices/<pcieRoot>/<bdf>
    sys/bus/pci/drivers/{nvidia,vfio-pci}/, sys/bus/pci/drivers_probe
    sys/kernel/iommu_groups/<group>/devices/<bdf> -> ...
    sys/class/misc/iommu                                 when iommufd is on
    dev/vfio/vfio, dev/vfio/<group>, dev/vfio/devices/vfio<N>, dev/iommu   (plain files)
    fake/users/<bdf>         PIDs "using" the GPU, one per line (test hook)
    fake/fail-probe/<bdf>    the next N probes of <bdf> bind nothing (test hook: a crash)

The kernel rules played here: a probe binds the ``driver_override`` if set, otherwise
``nvidia`` for an NVIDIA GPU; binding ``vfio-pci`` creates the group's ``/dev/vfio`` node.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from dra_nvlib.facts import GpuInfo
from dra_nvlib.pci_bus import PassthroughTarget, PciBus
from dra_nvlib.profiles import GPU_MODELS
from dra_nvlib.sysfs import NVIDIA_VENDOR_ID, pci_device_dir

__all__ = ["FakePciBus"]

_GPU_CLASS = "0x030200"  # 3D controller, as data-center GPUs report
_DRIVERS = ("nvidia", "vfio-pci")


def _group_of(bus_id: str) -> int:
    # One group per GPU, numbered after its bus, so names are stable and easy to read.
    return int(bus_id.split(":")[1], 16)


class FakePciBus(PciBus):
    """A fake host tree under ``root`` (``root/sys`` is its sysfs)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root / "sys")
        self.root = root

    @property
    def dev_root(self) -> Path:
        """The fake host's ``/dev``."""
        return self.root / "dev"

    # -- building ---------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the tree was built."""
        return (self.sysfs_root / "bus" / "pci" / "drivers_probe").exists()

    def build(self, gpus: Iterable[GpuInfo], *, iommufd: bool = True) -> None:
        """Create the tree with every GPU bound to ``nvidia`` (idempotent per GPU)."""
        sys = self.sysfs_root
        for driver in _DRIVERS:
            (sys / "bus" / "pci" / "drivers" / driver).mkdir(parents=True, exist_ok=True)
        (self.dev_root / "vfio").mkdir(parents=True, exist_ok=True)
        (self.dev_root / "vfio" / "vfio").touch()
        if iommufd:
            (sys / "class" / "misc" / "iommu").mkdir(parents=True, exist_ok=True)
            (self.dev_root / "iommu").touch()
        for gpu in gpus:
            model = next(
                (m for m in GPU_MODELS.values() if m.product_name == gpu.product_name), None
            )
            device_id = f"0x{model.pci_device_id >> 16:04x}" if model is not None else "0x0000"
            self.add_function(
                gpu.pci_bus_id,
                pcie_root=gpu.pcie_root or "pci0000:00",
                vendor=f"0x{NVIDIA_VENDOR_ID}",
                device=device_id,
                class_code=_GPU_CLASS,
                group=_group_of(gpu.pci_bus_id),
                driver="nvidia",
                numa_node=gpu.numa_node if gpu.numa_node is not None else -1,
            )
        (sys / "bus" / "pci" / "drivers_probe").touch()

    def add_function(
        self,
        bus_id: str,
        *,
        pcie_root: str,
        vendor: str,
        device: str,
        class_code: str,
        group: int | None,
        driver: str | None,
        numa_node: int = -1,
    ) -> None:
        """Add one PCI function (tests add a foreign device to a GPU's group this way)."""
        sys = self.sysfs_root
        real = sys / "devices" / pcie_root / bus_id
        if real.exists():
            return
        real.mkdir(parents=True)
        (real / "vendor").write_text(vendor + "\n")
        (real / "device").write_text(device + "\n")
        (real / "class").write_text(class_code + "\n")
        (real / "numa_node").write_text(f"{numa_node}\n")
        (real / "driver_override").write_text("(null)\n")
        link = sys / "bus" / "pci" / "devices" / bus_id
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../devices/{pcie_root}/{bus_id}", link)
        if group is not None:
            members = sys / "kernel" / "iommu_groups" / str(group) / "devices"
            members.mkdir(parents=True, exist_ok=True)
            os.symlink(f"../../../../devices/{pcie_root}/{bus_id}", members / bus_id)
            os.symlink(f"../../../kernel/iommu_groups/{group}", real / "iommu_group")
        if driver is not None:
            (sys / "bus" / "pci" / "drivers" / driver).mkdir(parents=True, exist_ok=True)
            self._attach(bus_id, driver)

    # -- test hooks -------------------------------------------------------------------------

    def set_users(self, bus_id: str, pids: Iterable[int]) -> None:
        """Pretend these processes hold the GPU open (empty: nobody)."""
        path = self.root / "fake" / "users" / bus_id
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{pid}\n" for pid in pids))

    def fail_next_probes(self, bus_id: str, times: int = 1) -> None:
        """The next ``times`` probes of ``bus_id`` bind no driver (a crash mid-switch)."""
        path = self.root / "fake" / "fail-probe" / bus_id
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{times}\n")

    # -- the kernel's part ------------------------------------------------------------------

    def _attach(self, bus_id: str, driver: str) -> None:
        base = pci_device_dir(self.sysfs_root, bus_id)
        os.symlink(f"../../../bus/pci/drivers/{driver}", base / "driver")
        if driver != "vfio-pci":
            return
        group = (base / "iommu_group").resolve().name
        (self.dev_root / "vfio" / group).touch()
        if (self.sysfs_root / "class" / "misc" / "iommu").exists():
            index = int(group)
            (base / "vfio-dev" / f"vfio{index}").mkdir(parents=True, exist_ok=True)
            (self.dev_root / "vfio" / "devices").mkdir(parents=True, exist_ok=True)
            (self.dev_root / "vfio" / "devices" / f"vfio{index}").touch()

    def set_driver_override(self, bus_id: str, driver: str | None) -> None:
        """Record the override, as the kernel does."""
        path = pci_device_dir(self.sysfs_root, bus_id) / "driver_override"
        path.write_text((driver or "(null)") + "\n")

    def unbind(self, bus_id: str) -> None:
        """Detach the driver: ``driver`` link, ``vfio-dev`` and ``/dev/vfio`` nodes go."""
        base = pci_device_dir(self.sysfs_root, bus_id)
        link = base / "driver"
        if not link.is_symlink():
            return
        if Path(os.readlink(link)).name == "vfio-pci":
            group = (base / "iommu_group").resolve().name
            with contextlib.suppress(FileNotFoundError):
                (self.dev_root / "vfio" / group).unlink()
            for cdev in list((base / "vfio-dev").iterdir()) if (base / "vfio-dev").is_dir() else []:
                with contextlib.suppress(FileNotFoundError):
                    (self.dev_root / "vfio" / "devices" / cdev.name).unlink()
                cdev.rmdir()
        link.unlink()

    def probe(self, bus_id: str) -> None:
        """Bind the override, or ``nvidia`` for an NVIDIA GPU; a fail-probe hook binds none."""
        base = pci_device_dir(self.sysfs_root, bus_id)
        if (base / "driver").is_symlink():
            return
        fail = self.root / "fake" / "fail-probe" / bus_id
        if fail.exists():
            left = int(fail.read_text().strip() or "0")
            if left > 0:
                fail.write_text(f"{left - 1}\n")
                return
        override = (base / "driver_override").read_text().strip()
        if override and override != "(null)":
            driver: str | None = override
        elif (base / "vendor").read_text().strip() == f"0x{NVIDIA_VENDOR_ID}":
            driver = "nvidia"
        else:
            driver = None
        if driver is not None and (self.sysfs_root / "bus" / "pci" / "drivers" / driver).is_dir():
            self._attach(bus_id, driver)

    def users(self, gpu: PassthroughTarget) -> tuple[int, ...]:
        """PIDs recorded by :meth:`set_users` for the GPU."""
        path = self.root / "fake" / "users" / gpu.bus_id
        try:
            return tuple(int(line) for line in path.read_text().split() if line)
        except FileNotFoundError:
            return ()
