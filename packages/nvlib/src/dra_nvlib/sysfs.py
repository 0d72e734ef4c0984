"""PCIe facts from sysfs: the root complex a PCI device hangs off, its NUMA node."""

from __future__ import annotations

import os
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
