"""Passthrough claims through the claim engine, in process: the fake GPU backend and its fake
host tree, the directory claim source, real checkpoint and CDI files in temp directories."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import (
    Checkpoint,
    CheckpointStore,
    ClaimState,
    PreparedClaim,
    PreparedDevice,
)
from dra_kubelet_core.claim_source import DirectoryClaimSource
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_core.events import LogEventRecorder
from dra_kubelet_core.host_devices import StandInDeviceNodes
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.node_lock import NodeLock
from dra_kubelet_core.state import ClaimEngine
from dra_kubelet_plugin.cdi import GPU_CDI
from dra_kubelet_plugin.container_edits import FakeEdits
from dra_kubelet_plugin.device_metadata import MetadataFiles
from dra_kubelet_plugin.gpu_driver import GpuDriver, GpuPlan
from dra_kubelet_plugin.inventory import NodeDevice
from dra_kubelet_plugin.passthrough_claims import PassthroughClaims
from dra_kubelet_plugin.passthrough_devices import Passthrough
from dra_kubelet_plugin.plugin import enumerate_devices
from dra_nvlib import DeviceLibConfig, FakeDeviceLib, FakePciBus, open_device_lib
from kubelet_plugin_support import gpu_config, make_claim, write_claim

VFIO_PARAMETERS = {
    "apiVersion": "resource.nvidia.com/v1beta1",
    "kind": "VfioDeviceConfig",
    "iommu": {"backendPolicy": "PreferIommuFD", "enableAPIDevice": True},
}


@dataclass
class Node:
    """One simulated node with passthrough on."""

    root: Path
    lib: FakeDeviceLib
    boot_id: str = "boot-1"
    changes: int = 0

    @property
    def bus(self) -> FakePciBus:
        bus = self.lib.pci_bus()
        assert isinstance(bus, FakePciBus)
        return bus

    def claims(self) -> PassthroughClaims:
        def changed() -> None:
            self.changes += 1

        return PassthroughClaims(
            Passthrough(self.bus, host=StandInDeviceNodes(), lib=self.lib, wait_timeout_s=0),
            driver_name="gpu.nvidia.com",
            metadata=MetadataFiles(self.root / "plugin", driver="gpu.nvidia.com"),
            on_change=changed,
        )

    def state(self) -> tuple[ClaimEngine[GpuPlan], PassthroughClaims]:
        (self.root / "plugin").mkdir(parents=True, exist_ok=True)
        passthrough = self.claims()
        driver = GpuDriver(
            driver_name="gpu.nvidia.com",
            devices=enumerate_devices(self.lib, passthrough),
            edits=FakeEdits(self.root / "plugin" / "claims"),
            passthrough=passthrough,
        )
        state = ClaimEngine(
            driver=driver,
            pool_name="n1",
            claims=DirectoryClaimSource(self.root / "claims"),
            checkpoints=CheckpointStore(self.root / "plugin" / "checkpoint.json"),
            cdi=CDIStore(self.root / "cdi", kind=GPU_CDI),
            lock=NodeLock(self.root / "plugin" / "prepare.lock"),
            boot_id=self.boot_id,
            events=LogEventRecorder("n1"),
            metrics=PluginMetrics(),
        )
        return state, passthrough

    def add(self, claim: dict[str, Any]) -> ClaimRef:
        write_claim(self.root / "claims", claim)
        meta = claim["metadata"]
        return ClaimRef(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])

    def driver_of(self, device: str) -> str | None:
        bus_id = next(
            d.gpu.pci_bus_id for d in enumerate_devices(self.lib, None) if d.name == device
        )
        return self.bus.facts(bus_id).driver

    def spec(self, uid: str) -> dict[str, Any]:
        (path,) = (self.root / "cdi").glob(f"*{uid}*.json")
        return dict(json.loads(path.read_text()))


def published(state: ClaimEngine[GpuPlan]) -> list[NodeDevice]:
    """The devices the engine's GPU driver serves (before passthrough hides twins)."""
    assert isinstance(state.driver, GpuDriver)
    return list(state.driver.devices.values())


@pytest.fixture
def node(tmp_path: Path) -> Node:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="2xA100-40GB",
        fake_state_path=tmp_path / "fake.json",
    )
    lib = open_device_lib(config)
    assert isinstance(lib, FakeDeviceLib)
    return Node(root=tmp_path, lib=lib)


def test_vfio_claim_binds_hides_the_twin_and_unprepare_restores(node: Node) -> None:
    ref = node.add(make_claim(name="vm", uid="uid-vm", devices=["gpu-vfio-0"]))

    async def go() -> None:
        state, passthrough = node.state()
        await state.start()
        names = [d.name for d in passthrough.visible(published(state))]
        assert names == ["gpu-0", "gpu-1", "gpu-vfio-0", "gpu-vfio-1"]
        outcome = (await state.prepare_claims([ref]))[ref.uid]
        assert outcome.error == ""
        assert node.driver_of("gpu-0") == "vfio-pci"
        names = [d.name for d in passthrough.visible(published(state))]
        assert names == ["gpu-1", "gpu-vfio-0", "gpu-vfio-1"]
        assert node.changes >= 2
        spec = node.spec(ref.uid)
        (device,) = spec["devices"]
        edits = device["containerEdits"]
        assert edits["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
        # No config: NVIDIA's default has no API device node.
        assert [n["path"] for n in edits["deviceNodes"]] == ["/dev/vfio/7"]
        assert all(n["hostPath"] == "/dev/null" for n in edits["deviceNodes"])
        # No driver files, no fake nvidia-smi: the container gets a PCI function, not CUDA.
        assert "containerEdits" not in spec or not spec["containerEdits"].get("mounts")
        (mount,) = edits["mounts"]
        assert mount["containerPath"] == (
            "/var/run/dra-device-attributes/vm/gpu/gpu.nvidia.com-metadata.json"
        )
        meta = json.loads(Path(mount["hostPath"]).read_text())
        (dev,) = meta["requests"][0]["devices"]
        assert dev["attributes"]["resource.kubernetes.io/pciBusID"] == {"string": "0000:07:00.0"}
        assert dev["attributes"]["iommuGroup"] == {"int": 7}
        entry = (await state.prepared_claims())[ref.uid]
        gpu0 = node.lib.gpus()[0].uuid
        assert entry.devices[0].driver_state == {
            "vfioPciBusID": "0000:07:00.0",
            "gpuUUID": gpu0,
            "persistenceMode": True,
        }
        # The driver loses the GPU's persistence mode while vfio-pci holds it.
        node.lib.set_persistence_mode(gpu0, enabled=False)

        await state.unprepare_claims([ref])
        assert node.driver_of("gpu-0") == "nvidia"
        assert node.lib.persistence_mode(gpu0) is True, "restored after passthrough"
        assert len(passthrough.visible(published(state))) == 4
        assert not Path(mount["hostPath"]).exists()

    asyncio.run(go())


def test_iommufd_policy_and_the_twin_of_a_held_gpu_is_refused(node: Node) -> None:
    vm = node.add(
        make_claim(
            name="vm", uid="uid-vm", devices=["gpu-vfio-1"], configs=[gpu_config(VFIO_PARAMETERS)]
        )
    )
    ctr = node.add(make_claim(name="ctr", uid="uid-ctr", devices=["gpu-1"]))

    async def go() -> None:
        state, _ = node.state()
        await state.start()
        assert (await state.prepare_claims([vm]))[vm.uid].error == ""
        edits = node.spec(vm.uid)["devices"][0]["containerEdits"]
        assert [n["path"] for n in edits["deviceNodes"]] == [
            "/dev/vfio/devices/vfio15",
            "/dev/iommu",
        ]
        refused = (await state.prepare_claims([ctr]))[ctr.uid]
        assert "gpu-1 is the same GPU (0000:0f:00.0) as gpu-vfio-1" in refused.error
        assert node.driver_of("gpu-1") == "vfio-pci", "the VM keeps its GPU"

    asyncio.run(go())


def test_gpu_in_use_is_a_per_claim_error_and_stays_on_nvidia(node: Node) -> None:
    ref = node.add(make_claim(name="vm", uid="uid-vm", devices=["gpu-vfio-0"]))
    node.bus.set_users("0000:07:00.0", [4321])

    async def go() -> None:
        state, passthrough = node.state()
        await state.start()
        outcome = (await state.prepare_claims([ref]))[ref.uid]
        assert "gpu-vfio-0 (0000:07:00.0) cannot be passed through" in outcome.error
        assert "4321" in outcome.error
        assert node.driver_of("gpu-0") == "nvidia"
        assert passthrough.held() == {}, "a failed claim holds nothing"

    asyncio.run(go())


def test_a_crash_between_unbind_and_bind_is_repaired_at_start(node: Node) -> None:
    ref = node.add(make_claim(name="vm", uid="uid-vm", devices=["gpu-vfio-0"]))
    # What a plugin killed mid-switch leaves: the entry Started with the GPU's address, and
    # the GPU unbound from nvidia with vfio-pci not bound yet.
    store = CheckpointStore(node.root / "plugin" / "checkpoint.json")
    (node.root / "plugin").mkdir(parents=True)
    store.save(
        Checkpoint(
            boot_id=node.boot_id,
            claims={
                ref.uid: PreparedClaim(
                    uid=ref.uid,
                    namespace=ref.namespace,
                    name=ref.name,
                    state=ClaimState.PREPARE_STARTED,
                    devices=(
                        PreparedDevice(
                            request_names=("gpu",),
                            pool_name="n1",
                            device_name="gpu-vfio-0",
                            cdi_device_ids=(),
                            driver_state={"vfioPciBusID": "0000:07:00.0"},
                        ),
                    ),
                )
            },
        )
    )
    node.bus.set_driver_override("0000:07:00.0", "vfio-pci")
    node.bus.unbind("0000:07:00.0")
    assert node.driver_of("gpu-0") is None

    async def go() -> None:
        state, _ = node.state()
        await state.start()
        assert node.driver_of("gpu-0") == "nvidia", "never left on no driver"
        # The kubelet's retry prepares it again.
        assert (await state.prepare_claims([ref]))[ref.uid].error == ""
        assert node.driver_of("gpu-0") == "vfio-pci"

    asyncio.run(go())


def test_a_reboot_prepares_again_and_a_leftover_binding_goes_back(node: Node) -> None:
    ref = node.add(make_claim(name="vm", uid="uid-vm", devices=["gpu-vfio-0"]))

    async def go() -> None:
        state, _ = node.state()
        await state.start()
        assert (await state.prepare_claims([ref]))[ref.uid].error == ""
        node.boot_id = "boot-2"
        rebooted, passthrough = node.state()
        await rebooted.start()
        assert node.driver_of("gpu-0") == "nvidia"
        assert passthrough.held() == {}
        assert (await rebooted.prepare_claims([ref]))[ref.uid].error == ""
        assert node.driver_of("gpu-0") == "vfio-pci"

    asyncio.run(go())


def test_fake_host_tree_is_shared_by_every_process_of_the_node(node: Node) -> None:
    link = node.bus.sysfs_root / "bus" / "pci" / "devices" / "0000:07:00.0"
    assert os.path.islink(link)
    assert node.root / "fake.host" == node.bus.root


def test_a_shared_gpu_keeps_its_twin_hidden_until_the_last_claim_goes(node: Node) -> None:
    first = node.add(make_claim(name="a", uid="uid-a", devices=["gpu-0"], admin_access=True))
    second = node.add(make_claim(name="b", uid="uid-b", devices=["gpu-0"], admin_access=True))

    async def go() -> None:
        state, passthrough = node.state()
        await state.start()
        outcomes = await state.prepare_claims([first, second])
        assert [o.error for o in outcomes.values()] == ["", ""]
        assert passthrough.held() == {"gpu-0": {"uid-a", "uid-b"}}
        await state.unprepare_claims([first])
        visible = [d.name for d in passthrough.visible(published(state))]
        assert "gpu-vfio-0" not in visible, "uid-b still uses gpu-0"
        await state.unprepare_claims([second])
        visible = [d.name for d in passthrough.visible(published(state))]
        assert "gpu-vfio-0" in visible

    asyncio.run(go())
