"""Whether a node has a local NVSwitch fabric managed by Fabric Manager (reads only).

As NVIDIA's driver detects it: NVSwitch devices listed by the ``nvidia-nvswitch`` kernel
driver (``<proc>/driver/nvidia-nvswitch/devices``), or an NVLink5 switch-managed fabric (an
InfiniBand device whose VPD carries the ``SW_MNG`` marker). Such a node is a single-node
NVLink system: its GPUs register with the fabric only when their Fabric Manager partition is
activated.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["has_nvswitch_fabric"]

_SWITCH_MANAGED_MARKER = b"SW_MNG"


def has_nvswitch_fabric(*, proc_root: Path, sysfs_root: Path) -> bool:
    """True when ``proc_root``/``sysfs_root`` show NVSwitch devices or an NVLink5 switch.

    Raises:
        OSError: a directory or VPD file exists but cannot be read (not a missing one).
    """
    devices = proc_root / "driver" / "nvidia-nvswitch" / "devices"
    try:
        if any(devices.iterdir()):
            return True
    except FileNotFoundError:
        pass
    for vpd in sorted(sysfs_root.glob("class/infiniband/*/device/vpd")):
        try:
            if _SWITCH_MANAGED_MARKER in vpd.read_bytes():
                return True
        except FileNotFoundError:
            continue
    return False
