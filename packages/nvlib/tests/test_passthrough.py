"""Passthrough over the fake host tree: facts, bind/unbind, a crash in between, group rules."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dra_nvlib import (
    DeviceLibConfig,
    DriverBindError,
    FakeDeviceLib,
    FakePciBus,
    InUseError,
    IommuGroupError,
    IommuUnavailableError,
    PassthroughTarget,
    bind_nvidia,
    bind_vfio,
    group_refusal,
    open_device_lib,
    read_pci_facts,
    repair_unbound,
)


@pytest.fixture
def lib(tmp_path: Path) -> FakeDeviceLib:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="2xA100-40GB",
        fake_state_path=tmp_path / "s.json",
    )
    opened = open_device_lib(config)
    assert isinstance(opened, FakeDeviceLib)
    return opened


def _target(lib: FakeDeviceLib, index: int = 0) -> PassthroughTarget:
    gpu = lib.gpus()[index]
    return PassthroughTarget(bus_id=gpu.pci_bus_id, minor=gpu.minor)


def test_fake_tree_reports_facts_like_sysfs(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    gpu = lib.gpus()[0]
    facts = read_pci_facts(bus.sysfs_root, gpu.pci_bus_id)
    assert facts is not None
    assert (facts.vendor_id, facts.device_id, facts.driver) == ("10de", "20b0", "nvidia")
    assert facts.is_gpu
    assert not facts.is_bridge
    assert facts.iommu_group == 7
    assert facts.group_members == (gpu.pci_bus_id,)
    assert facts.vfio_device is None
    assert facts.driver_override is None
    assert bus.gpu_bus_ids() == tuple(g.pci_bus_id for g in lib.gpus())
    assert bus.iommu_enabled()
    assert bus.iommufd_available()
    # The same tree a second process opens: not rebuilt, same answers.
    assert lib.pci_bus().facts(gpu.pci_bus_id) == facts


def test_bind_vfio_then_back_to_nvidia(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    assert isinstance(bus, FakePciBus)
    target = _target(lib)
    facts = bind_vfio(bus, target, ours=bus.gpu_bus_ids())
    assert facts.driver == "vfio-pci"
    assert facts.driver_override == "vfio-pci"
    assert facts.vfio_device == "vfio7"
    assert (bus.dev_root / "vfio" / "7").exists()
    assert (bus.dev_root / "vfio" / "devices" / "vfio7").exists()
    assert bind_vfio(bus, target, ours=bus.gpu_bus_ids()) == facts  # idempotent
    back = bind_nvidia(bus, target.bus_id)
    assert back.driver == "nvidia"
    assert back.driver_override is None
    assert back.vfio_device is None
    assert not (bus.dev_root / "vfio" / "7").exists()
    assert bind_nvidia(bus, target.bus_id) == back  # idempotent
    # The other GPU never moved.
    assert bus.facts(_target(lib, 1).bus_id).driver == "nvidia"


def test_gpu_in_use_is_refused_and_left_on_nvidia(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    target = _target(lib)
    bus.set_users(target.bus_id, [4242])
    clock = iter(float(t) for t in range(100))
    with pytest.raises(InUseError, match="4242") as info:
        bind_vfio(
            bus,
            target,
            ours=bus.gpu_bus_ids(),
            wait_timeout_s=3,
            sleep=lambda _s: None,
            clock=lambda: next(clock),
        )
    assert info.value.gpu == target.bus_id
    assert bus.facts(target.bus_id).driver == "nvidia"


def test_waits_for_the_last_user_to_leave(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    target = _target(lib)
    bus.set_users(target.bus_id, [7])
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        bus.set_users(target.bus_id, [])

    assert bind_vfio(bus, target, ours=bus.gpu_bus_ids(), sleep=sleep).driver == "vfio-pci"
    assert len(sleeps) == 1


def test_group_shared_with_a_foreign_device_is_refused(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    assert isinstance(bus, FakePciBus)
    target = _target(lib)
    bus.add_function(
        "0000:07:00.1",
        pcie_root="pci0000:00",
        vendor="0x15b3",
        device="0x101b",
        class_code="0x020000",
        group=7,
        driver="mlx5_core",
    )
    with pytest.raises(IommuGroupError, match=r"shared with 0000:07:00\.1 .*not ours"):
        bind_vfio(bus, target, ours=bus.gpu_bus_ids())
    assert bus.facts(target.bus_id).driver == "nvidia"


def test_group_rule_allows_bridges_and_released_gpus(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    gpu = bus.facts(_target(lib).bus_id)
    other = bus.facts(_target(lib, 1).bus_id)
    bridge = type(gpu)(**{**gpu.__dict__, "bus_id": "0000:00:01.0", "class_code": 0x060400})
    members = {gpu.bus_id: gpu, bridge.bus_id: bridge, other.bus_id: other}
    ours = {gpu.bus_id, other.bus_id}
    assert "still bound to nvidia" in (group_refusal(gpu.bus_id, members, ours) or "")
    released = type(other)(**{**other.__dict__, "driver": "vfio-pci"})
    assert group_refusal(gpu.bus_id, {**members, other.bus_id: released}, ours) is None


def test_no_iommu_is_refused(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    target = _target(lib)
    groups = bus.sysfs_root / "kernel" / "iommu_groups"
    for group in groups.iterdir():
        for link in (group / "devices").iterdir():
            link.unlink()
        (group / "devices").rmdir()
        group.rmdir()
    with pytest.raises(IommuUnavailableError, match="no IOMMU"):
        bind_vfio(bus, target, ours=bus.gpu_bus_ids())
    assert bus.facts(target.bus_id).driver == "nvidia"


def test_a_bind_that_does_not_take_is_rolled_back(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    assert isinstance(bus, FakePciBus)
    target = _target(lib)
    bus.fail_next_probes(target.bus_id, times=1)
    with pytest.raises(DriverBindError, match="bound to nvidia again"):
        bind_vfio(bus, target, ours=bus.gpu_bus_ids())
    assert bus.facts(target.bus_id).driver == "nvidia"


def test_crash_between_unbind_and_bind_is_repaired(lib: FakeDeviceLib) -> None:
    bus = lib.pci_bus()
    target = _target(lib)
    # What a process killed after the unbind leaves behind: an override and no driver.
    bus.set_driver_override(target.bus_id, "vfio-pci")
    bus.unbind(target.bus_id)
    assert bus.facts(target.bus_id).driver is None
    assert repair_unbound(bus, bus.gpu_bus_ids()) == [target.bus_id]
    facts = bus.facts(target.bus_id)
    assert facts.driver == "nvidia"
    assert facts.driver_override is None
    assert repair_unbound(bus, bus.gpu_bus_ids()) == []


def test_sysfs_writes_follow_the_kernel_interface(tmp_path: Path) -> None:
    from dra_nvlib import SysfsPciBus

    bdf = "0000:07:00.0"
    dev = tmp_path / "sys" / "devices" / "pci0000:00" / bdf
    (dev).mkdir(parents=True)
    drivers = tmp_path / "sys" / "bus" / "pci" / "drivers" / "nvidia"
    drivers.mkdir(parents=True)
    (drivers / "unbind").touch()
    (tmp_path / "sys" / "bus" / "pci" / "devices").mkdir()
    os.symlink(dev, tmp_path / "sys" / "bus" / "pci" / "devices" / bdf)
    os.symlink(drivers, dev / "driver")
    (tmp_path / "sys" / "bus" / "pci" / "drivers_probe").touch()
    (dev / "driver_override").touch()
    proc = tmp_path / "proc" / "321" / "fd"
    proc.mkdir(parents=True)
    os.symlink("/dev/nvidia0", proc / "5")
    bus = SysfsPciBus(tmp_path / "sys", proc_root=tmp_path / "proc")
    bus.set_driver_override(bdf, "vfio-pci")
    bus.unbind(bdf)
    bus.probe(bdf)
    assert (dev / "driver_override").read_text() == "vfio-pci\n"
    assert (drivers / "unbind").read_text() == bdf
    assert (tmp_path / "sys" / "bus" / "pci" / "drivers_probe").read_text() == bdf
    assert bus.users(PassthroughTarget(bus_id=bdf, minor=0)) == (321,)
    assert bus.users(PassthroughTarget(bus_id=bdf, minor=1)) == ()


def test_fake_persistence_mode_is_recorded(lib: FakeDeviceLib) -> None:
    uuid = lib.gpus()[0].uuid
    assert lib.persistence_mode(uuid) is True
    lib.set_persistence_mode(uuid, enabled=False)
    assert lib.persistence_mode(uuid) is False
    lib.set_persistence_mode(uuid, enabled=True)
    assert lib.persistence_mode(uuid) is True


def test_fake_tree_numa_node_is_the_gpus(lib: FakeDeviceLib) -> None:
    for gpu in lib.gpus():
        assert lib.pci_bus().facts(gpu.pci_bus_id).numa_node == gpu.numa_node
