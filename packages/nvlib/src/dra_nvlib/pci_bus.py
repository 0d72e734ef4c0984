"""The PCI bus as the kernel exposes it: facts read from sysfs and the driver-binding writes
(``driver_override``, ``unbind``, ``drivers_probe``), the I/O edge of passthrough.

:class:`SysfsPciBus` writes the real files under a sysfs root (``/sys``, or ``/host/sys`` in a
container); :class:`dra_nvlib.fake_pci_bus.FakePciBus` keeps a tree with the same layout and
plays the kernel's part, so bindings are observable without hardware.
"""

from __future__ import annotations

import abc
import os
from dataclasses import dataclass
from pathlib import Path

from dra_nvlib.errors import DriverBindError, PassthroughError
from dra_nvlib.sysfs import (
    PciFacts,
    iommu_enabled,
    iommufd_available,
    nvidia_gpu_bus_ids,
    pci_device_dir,
    read_pci_facts,
)

__all__ = ["PassthroughTarget", "PciBus", "SysfsPciBus"]


@dataclass(frozen=True)
class PassthroughTarget:
    """A GPU to move between drivers: its PCI address and the minor of its
    ``/dev/nvidia<minor>`` (how its users are found while ``nvidia`` holds it)."""

    bus_id: str
    minor: int


class PciBus(abc.ABC):
    """Read PCI facts and move a function between kernel drivers."""

    def __init__(self, sysfs_root: Path) -> None:
        self.sysfs_root = sysfs_root

    def facts(self, bus_id: str) -> PciFacts:
        """Facts of one function.

        Raises:
            PassthroughError: no such function on the bus.
        """
        facts = read_pci_facts(self.sysfs_root, bus_id)
        if facts is None:
            raise PassthroughError(bus_id, "pci_facts", f"no PCI function under {self.sysfs_root}")
        return facts

    def gpu_bus_ids(self) -> tuple[str, ...]:
        """Every NVIDIA GPU function, in PCI enumeration order, whatever driver holds it."""
        return nvidia_gpu_bus_ids(self.sysfs_root)

    def iommu_enabled(self) -> bool:
        """Whether the kernel has an IOMMU (IOMMU groups exist)."""
        return iommu_enabled(self.sysfs_root)

    def iommufd_available(self) -> bool:
        """Whether ``/dev/iommu`` (iommufd) exists."""
        return iommufd_available(self.sysfs_root)

    @abc.abstractmethod
    def set_driver_override(self, bus_id: str, driver: str | None) -> None:
        """Make the next probe bind ``driver`` (``None``: clear the override)."""

    @abc.abstractmethod
    def unbind(self, bus_id: str) -> None:
        """Detach the function from its current driver (no-op when it has none)."""

    @abc.abstractmethod
    def probe(self, bus_id: str) -> None:
        """Ask the kernel to bind a driver (the override, else the matching one)."""

    @abc.abstractmethod
    def users(self, gpu: PassthroughTarget) -> tuple[int, ...]:
        """PIDs of the processes holding the GPU (``/dev/nvidia<minor>``) open."""


def _write(path: Path, text: str, *, bus_id: str, operation: str) -> None:
    try:
        with open(path, "w", encoding="ascii") as fh:
            fh.write(text)
    except OSError as exc:
        raise DriverBindError(
            bus_id, operation, f"write {text.strip()!r} to {path}: {exc.strerror}"
        ) from exc


class SysfsPciBus(PciBus):
    """The real kernel: writes under ``sysfs_root``, scans ``proc_root`` for GPU users."""

    def __init__(self, sysfs_root: Path, *, proc_root: Path = Path("/proc")) -> None:
        super().__init__(sysfs_root)
        self.proc_root = proc_root

    def set_driver_override(self, bus_id: str, driver: str | None) -> None:
        """Write the override (a lone newline clears it, as the kernel documents)."""
        path = pci_device_dir(self.sysfs_root, bus_id) / "driver_override"
        _write(path, (driver or "") + "\n", bus_id=bus_id, operation="driver_override")

    def unbind(self, bus_id: str) -> None:
        """Write the address to the current driver's ``unbind``."""
        driver_link = pci_device_dir(self.sysfs_root, bus_id) / "driver"
        if not driver_link.exists():
            return
        _write(driver_link / "unbind", bus_id, bus_id=bus_id, operation="unbind")

    def probe(self, bus_id: str) -> None:
        """Write the address to ``bus/pci/drivers_probe``."""
        path = self.sysfs_root / "bus" / "pci" / "drivers_probe"
        _write(path, bus_id, bus_id=bus_id, operation="drivers_probe")

    def users(self, gpu: PassthroughTarget) -> tuple[int, ...]:
        """Scan ``/proc/<pid>/fd`` for links to ``/dev/nvidia<minor>`` (what ``fuser`` does)."""
        node = f"/dev/nvidia{gpu.minor}"
        pids: list[int] = []
        try:
            entries = list(self.proc_root.iterdir())
        except FileNotFoundError:
            return ()
        for entry in entries:
            if not entry.name.isdigit():
                continue
            try:
                fds = list((entry / "fd").iterdir())
            except OSError:  # gone, or not ours to read
                continue
            for fd in fds:
                try:
                    target = os.readlink(fd)
                except OSError:
                    continue
                if target == node:
                    pids.append(int(entry.name))
                    break
        return tuple(sorted(pids))
