"""Deterministic identities for fake GPUs: the same node name always yields the same UUIDs
and PCI addresses, so devices published in ResourceSlices survive restarts."""

from __future__ import annotations

import hashlib
import uuid

# Bus numbers of the eight GPUs of an HGX/DGX baseboard; later GPUs continue past them.
_BUSES = (0x07, 0x0F, 0x47, 0x4E, 0x87, 0x90, 0xB7, 0xBD)
_NAMESPACE = uuid.UUID("6f1c6f0e-7d57-4b8e-9a59-2c1a0d9b7e11")


def _uuid_from(*parts: str) -> str:
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16]))


def gpu_uuid(node_name: str, *, index: int, model_key: str) -> str:
    """``GPU-xxxxxxxx-...`` for GPU ``index`` of ``model_key`` on ``node_name``."""
    return "GPU-" + _uuid_from("gpu", node_name, str(index), model_key)


def mig_uuid(parent_uuid: str, *, gi_id: int, ci_id: int) -> str:
    """``MIG-xxxxxxxx-...`` for a GI/CI pair, stable for the same parent and ids."""
    return "MIG-" + str(uuid.uuid5(_NAMESPACE, f"{parent_uuid}/{gi_id}/{ci_id}"))


def cluster_uuid(cluster_name: str) -> str:
    """NVLink fabric cluster UUID for a named fake NVL domain (shared across its nodes)."""
    return str(uuid.uuid5(_NAMESPACE, f"cluster/{cluster_name}"))


def pci_bus_id(index: int) -> str:
    """Extended BDF (``0000:07:00.0``) of GPU ``index``."""
    bus = _BUSES[index] if index < len(_BUSES) else 0xC0 + (index - len(_BUSES))
    if bus > 0xFF:
        raise ValueError(f"no fake PCI bus for GPU index {index}")
    return f"0000:{bus:02x}:00.0"


def numa_node(index: int) -> int:
    """NUMA node of GPU ``index``: the lower two root complexes on node 0, the upper on 1."""
    bus = int(pci_bus_id(index).split(":")[1], 16)
    return (bus >> 7) & 1


def pcie_root(index: int) -> str:
    """PCIe root complex (``pci0000:40``) the GPU hangs off: one per quarter of the bus range."""
    bus = int(pci_bus_id(index).split(":")[1], 16)
    return f"pci0000:{bus & 0xC0:02x}"
