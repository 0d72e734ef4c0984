"""PCIe facts from sysfs under a configurable root: the root complex a PCI device hangs off,
its NUMA node, its IDs, the kernel driver bound to it, its IOMMU group and iommufd
availability (pure reads)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def normalize_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:07:00.0`` (8-digit domain, upper case) as sysfs spells it:
    ``0000:07:00.0``."""
    domain, _, rest = bus_id.strip().partition(":")
    if not rest:
        raise ValueError(f"not a PCI bus id: {bus_id!r}")
    return f"{int(domain, 16):04x}:{rest.lower()}"


def numa_node(sysfs_root: Path, bus_id: str) -> int | None:
    """The device's ``numa_node``; ``None`` when unknown or ``-1`` (no NUMA affinity)."""
    try:
        value = int((sysfs_root / "bus" / "pci" / "devices" / bus_id / "numa_node").read_text())
    except (OSError, ValueError):
        return None
    return value if value >= 0 else None


def pcie_root(sysfs_root: Path, bus_id: str) -> str | None:
    """``pci0000:00`` for the device, or ``None`` when sysfs does not know it."""
    link = sysfs_root / "bus" / "pci" / "devices" / bus_id
    try:
        target = Path(os.path.realpath(link, strict=True))
    except OSError:
        return None
    for part in target.parts:
        if part.startswith("pci") and ":" in part:
            return part
    return None


#: PCI vendor ID of NVIDIA (``/sys/bus/pci/devices/*/vendor`` reads ``0x10de``).
NVIDIA_VENDOR_ID = "10de"
#: PCI base class of display controllers (VGA ``0x0300``, 3D ``0x0302``): a GPU.
_DISPLAY_CLASS = 0x03
#: PCI class of a PCI-to-PCI bridge: it may share a GPU's IOMMU group harmlessly.
PCI_BRIDGE_CLASS = 0x0604


@dataclass(frozen=True)
class PciFacts:
    """What sysfs says about one PCI function.

    ``driver`` is the kernel driver bound now (``nvidia``, ``vfio-pci``; ``None``: none);
    ``iommu_group`` is ``None`` without an IOMMU; ``group_members`` lists every function of
    the group, this one included; ``vfio_device`` is the iommufd character device
    (``vfio3``) the kernel creates while ``vfio-pci`` holds the function.
    """

    bus_id: str
    vendor_id: str
    device_id: str
    class_code: int
    driver: str | None
    driver_override: str | None
    iommu_group: int | None
    group_members: tuple[str, ...]
    numa_node: int | None
    vfio_device: str | None

    @property
    def is_gpu(self) -> bool:
        """An NVIDIA display controller (what this driver may pass through)."""
        return self.vendor_id == NVIDIA_VENDOR_ID and (self.class_code >> 16) == _DISPLAY_CLASS

    @property
    def is_bridge(self) -> bool:
        """A PCI-to-PCI bridge (harmless in a passed-through group)."""
        return (self.class_code >> 8) == PCI_BRIDGE_CLASS


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip()
    except (FileNotFoundError, NotADirectoryError):
        return None


def _hex_id(text: str | None) -> str:
    return "" if text is None else text.lower().removeprefix("0x")


def _link_name(path: Path) -> str | None:
    try:
        return Path(os.readlink(path)).name
    except OSError:
        return None


def pci_device_dir(sysfs_root: Path, bus_id: str) -> Path:
    """``<sysfs>/bus/pci/devices/<bdf>``: the function's directory (a symlink on Linux)."""
    return sysfs_root / "bus" / "pci" / "devices" / bus_id


def read_pci_facts(sysfs_root: Path, bus_id: str) -> PciFacts | None:
    """Facts of the PCI function ``bus_id`` (``0000:07:00.0``), ``None`` when absent."""
    base = pci_device_dir(sysfs_root, bus_id)
    vendor = _read(base / "vendor")
    if vendor is None:
        return None
    group_name = _link_name(base / "iommu_group")
    group = int(group_name) if group_name is not None and group_name.isdigit() else None
    members: tuple[str, ...] = ()
    if group is not None:
        group_dir = sysfs_root / "kernel" / "iommu_groups" / str(group) / "devices"
        try:
            members = tuple(sorted(p.name for p in group_dir.iterdir()))
        except FileNotFoundError:
            members = (bus_id,)
    vfio_dev: str | None = None
    try:
        vfio_dev = next((p.name for p in sorted((base / "vfio-dev").iterdir())), None)
    except (FileNotFoundError, NotADirectoryError):
        vfio_dev = None
    override = _read(base / "driver_override")
    class_text = _hex_id(_read(base / "class"))
    return PciFacts(
        bus_id=bus_id,
        vendor_id=_hex_id(vendor),
        device_id=_hex_id(_read(base / "device")),
        class_code=int(class_text, 16) if class_text else 0,
        driver=_link_name(base / "driver"),
        driver_override=None if override in (None, "", "(null)") else override,
        iommu_group=group,
        group_members=members,
        numa_node=numa_node(sysfs_root, bus_id),
        vfio_device=vfio_dev,
    )


def nvidia_gpu_bus_ids(sysfs_root: Path) -> tuple[str, ...]:
    """Bus IDs of every NVIDIA GPU function on the bus, whatever driver holds it, sorted:
    the PCI enumeration order (a GPU bound to ``vfio-pci`` is invisible to NVML)."""
    try:
        names = sorted(p.name for p in (sysfs_root / "bus" / "pci" / "devices").iterdir())
    except FileNotFoundError:
        return ()
    out: list[str] = []
    for name in names:
        facts = read_pci_facts(sysfs_root, name)
        if facts is not None and facts.is_gpu:
            out.append(name)
    return tuple(out)


def iommu_enabled(sysfs_root: Path) -> bool:
    """Whether the kernel runs with an IOMMU (it then lists IOMMU groups)."""
    try:
        return any((sysfs_root / "kernel" / "iommu_groups").iterdir())
    except FileNotFoundError:
        return False


def iommufd_available(sysfs_root: Path) -> bool:
    """Whether ``/dev/iommu`` exists (the iommufd misc device, Linux 6.2+)."""
    return (sysfs_root / "class" / "misc" / "iommu").exists()
