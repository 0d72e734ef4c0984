"""NVSwitch fabric detection, as NVIDIA's driver reads it from /proc and /sys."""

from __future__ import annotations

from pathlib import Path

from dra_nvlib import has_nvswitch_fabric


def test_no_nvswitch_driver_and_no_infiniband_is_no_fabric(tmp_path: Path) -> None:
    assert not has_nvswitch_fabric(proc_root=tmp_path / "proc", sysfs_root=tmp_path / "sys")


def test_listed_nvswitch_devices_are_a_fabric_an_empty_list_is_not(tmp_path: Path) -> None:
    devices = tmp_path / "proc" / "driver" / "nvidia-nvswitch" / "devices"
    devices.mkdir(parents=True)
    assert not has_nvswitch_fabric(proc_root=tmp_path / "proc", sysfs_root=tmp_path / "sys")
    (devices / "0000:05:00.0").write_text("")
    assert has_nvswitch_fabric(proc_root=tmp_path / "proc", sysfs_root=tmp_path / "sys")


def test_an_nvlink5_switch_managed_vpd_is_a_fabric(tmp_path: Path) -> None:
    plain = tmp_path / "sys" / "class" / "infiniband" / "mlx5_0" / "device"
    plain.mkdir(parents=True)
    (plain / "vpd").write_bytes(b"\x82ConnectX-7")
    assert not has_nvswitch_fabric(proc_root=tmp_path / "proc", sysfs_root=tmp_path / "sys")
    switch = tmp_path / "sys" / "class" / "infiniband" / "mlx5_1" / "device"
    switch.mkdir(parents=True)
    (switch / "vpd").write_bytes(b"\x82NVLink5 SW_MNG\x00")
    assert has_nvswitch_fabric(proc_root=tmp_path / "proc", sysfs_root=tmp_path / "sys")
