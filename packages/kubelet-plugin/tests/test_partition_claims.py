"""Fabric Manager partitions (gate ``FabricManagerPartitioning``) through the claim engine, in
process: the fake GPU backend with its fake host tree and the fake Fabric Manager, real
checkpoint and CDI files in temp directories. NVIDIA's behaviour is the reason for each
expectation (``cmd/gpu-kubelet-plugin/device_state.go``, ``pkg/fabricmanager``)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import CheckpointStore
from dra_kubelet_core.claim_source import DirectoryClaimSource
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_core.events import LogEventRecorder
from dra_kubelet_core.host_devices import StandInDeviceNodes
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.node_lock import NodeLock
from dra_kubelet_core.state import ClaimEngine
from dra_kubelet_plugin.cdi import GPU_CDI
from dra_kubelet_plugin.container_edits import FakeEdits
from dra_kubelet_plugin.gpu_driver import GpuDriver, GpuPlan
from dra_kubelet_plugin.partition_claims import STATE_KEY, PartitionClaims
from dra_kubelet_plugin.passthrough_claims import PassthroughClaims
from dra_kubelet_plugin.passthrough_devices import Passthrough
from dra_kubelet_plugin.plugin import enumerate_devices
from dra_nvlib import (
    DeviceLibConfig,
    FabricManagerError,
    FakeDeviceLib,
    FakeFabricManager,
    FakePciBus,
    open_device_lib,
)
from kubelet_plugin_support import make_claim, write_claim

# The HGX layout of 4 GPUs (module IDs 1-4): 0 = all; 1 = {1,2}; 2 = {3,4}; 3-6 = one each.
ALL, FIRST_PAIR, SECOND_PAIR = 0, 1, 2


@dataclass
class Node:
    """One simulated node with four GPUs, passthrough and Fabric Manager partitioning."""

    root: Path
    lib: FakeDeviceLib
    fm: FakeFabricManager
    boot_id: str = "boot-1"

    def state(self) -> ClaimEngine[GpuPlan]:
        (self.root / "plugin").mkdir(parents=True, exist_ok=True)
        bus = self.lib.pci_bus()
        assert isinstance(bus, FakePciBus)
        passthrough = PassthroughClaims(
            Passthrough(bus, host=StandInDeviceNodes(), lib=self.lib, wait_timeout_s=0),
            driver_name="gpu.nvidia.com",
        )
        driver = GpuDriver(
            driver_name="gpu.nvidia.com",
            devices=enumerate_devices(self.lib, passthrough),
            edits=FakeEdits(self.root / "plugin" / "claims"),
            passthrough=passthrough,
            partitions=PartitionClaims(self.fm),
        )
        return ClaimEngine(
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

    def add(self, name: str, devices: list[str]) -> ClaimRef:
        claim = make_claim(name=name, uid=f"uid-{name}", devices=devices)
        write_claim(self.root / "claims", claim)
        return ClaimRef(namespace="default", name=name, uid=f"uid-{name}")

    def active(self) -> set[int]:
        return {p.id for p in self.fm.partitions() if p.active}

    def checkpointed(self, uid: str) -> Any:
        loaded = CheckpointStore(self.root / "plugin" / "checkpoint.json").load()
        assert loaded.checkpoint is not None
        return loaded.checkpoint.claims[uid].driver_state.get(STATE_KEY)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    lib = open_device_lib(
        DeviceLibConfig(
            backend="fake",
            node_name="n1",
            fake_fleet="4xA100-40GB",
            fake_state_path=tmp_path / "fake.json",
        )
    )
    assert isinstance(lib, FakeDeviceLib)
    return Node(root=tmp_path, lib=lib, fm=FakeFabricManager(tmp_path / "fm.json", gpu_count=4))


def test_a_pair_of_passthrough_gpus_activates_their_partition_until_unprepare(node: Node) -> None:
    ref = node.add("vm", ["gpu-vfio-0", "gpu-vfio-1"])

    async def go() -> None:
        state = node.state()
        await state.start()
        outcome = (await state.prepare_claims([ref]))[ref.uid]
        assert outcome.error == ""
        assert node.active() == {FIRST_PAIR}
        assert node.checkpointed(ref.uid) == {"id": FIRST_PAIR, "modules": [1, 2]}
        assert (await state.unprepare_claims([ref]))[ref.uid].error == ""
        assert node.active() == set()

    asyncio.run(go())


def test_full_gpus_are_partitioned_too_and_one_gpu_is_its_partition_of_one(node: Node) -> None:
    # NVIDIA: with only this gate on, full-GPU claims are partitioned.
    pair = node.add("pair", ["gpu-2", "gpu-3"])
    single = node.add("single", ["gpu-0"])

    async def go() -> None:
        state = node.state()
        await state.start()
        outcomes = await state.prepare_claims([pair, single])
        assert [o.error for o in outcomes.values()] == ["", ""]
        assert node.active() == {SECOND_PAIR, 3}

    asyncio.run(go())


def test_gpus_that_form_no_partition_fail_the_prepare_before_anything_changes(
    node: Node,
) -> None:
    # NVIDIA: "GPU module set [...] does not match any FM partition; refusing partition
    # activation" -- the GPUs are not switched to vfio-pci either (activation comes first).
    ref = node.add("vm", ["gpu-vfio-0", "gpu-vfio-2"])

    async def go() -> None:
        state = node.state()
        await state.start()
        outcome = (await state.prepare_claims([ref]))[ref.uid]
        assert "GPU module set [1, 3] does not match any Fabric Manager partition" in (
            outcome.error
        )
        assert "refusing partition activation" in outcome.error
        assert node.active() == set()
        bus = node.lib.pci_bus()
        assert isinstance(bus, FakePciBus)
        assert {bus.facts(g.pci_bus_id).driver for g in node.lib.gpus()} == {"nvidia"}

    asyncio.run(go())


def test_a_partition_overlapping_an_active_one_is_refused_by_fabric_manager(node: Node) -> None:
    # Fabric Manager answers "in use" for a partition sharing GPUs with an active one.
    node.fm.activate(SECOND_PAIR)
    ref = node.add("one", ["gpu-2"])

    async def go() -> None:
        state = node.state()
        await state.start()  # recovery: SECOND_PAIR is no claim's, so it is deactivated
        assert node.active() == set()
        node.fm.activate(SECOND_PAIR)  # someone activates it while the plugin serves
        outcome = (await state.prepare_claims([ref]))[ref.uid]
        assert "activating Fabric Manager partition 5" in outcome.error
        assert "in use" in outcome.error
        assert node.active() == {SECOND_PAIR}

    asyncio.run(go())


def test_an_unreachable_fabric_manager_fails_prepare_and_unprepare_is_retried(
    node: Node,
) -> None:
    ref = node.add("vm", ["gpu-vfio-0", "gpu-vfio-1"])

    async def go() -> None:
        state = node.state()
        await state.start()
        node.fm.set_running(False)
        outcome = (await state.prepare_claims([ref]))[ref.uid]
        assert "cannot connect" in outcome.error
        node.fm.set_running(True)
        assert (await state.prepare_claims([ref]))[ref.uid].error == ""
        node.fm.set_running(False)
        failed = (await state.unprepare_claims([ref]))[ref.uid]
        assert f"deactivating Fabric Manager partition {FIRST_PAIR}" in failed.error
        node.fm.set_running(True)
        assert node.active() == {FIRST_PAIR}  # kept until the retry releases it
        assert (await state.unprepare_claims([ref]))[ref.uid].error == ""
        assert node.active() == set()

    asyncio.run(go())


def test_a_failed_prepare_after_activation_deactivates_the_partition(node: Node) -> None:
    ref = node.add("vm", ["gpu-vfio-0", "gpu-vfio-1"])
    bus = node.lib.pci_bus()
    assert isinstance(bus, FakePciBus)
    second = node.lib.gpus()[1].pci_bus_id
    bus.set_users(second, [4242])  # a process holds the GPU: vfio-pci cannot take it

    async def go() -> None:
        state = node.state()
        await state.start()
        outcome = (await state.prepare_claims([ref]))[ref.uid]
        assert outcome.error != ""
        assert node.active() == set()

    asyncio.run(go())


def test_a_restart_readopts_prepared_partitions_and_releases_leaked_ones(node: Node) -> None:
    ref = node.add("vm", ["gpu-vfio-0", "gpu-vfio-1"])

    async def go() -> None:
        first = node.state()
        await first.start()
        assert (await first.prepare_claims([ref]))[ref.uid].error == ""
        # While the plugin is down: Fabric Manager restarts (activations lost) and a
        # partition of no claim is left active (e.g. a claim removed with a lost checkpoint).
        node.fm.deactivate(FIRST_PAIR)
        node.fm.activate(SECOND_PAIR)
        restarted = node.state()
        await restarted.start()
        assert node.active() == {FIRST_PAIR}
        assert (await restarted.unprepare_claims([ref]))[ref.uid].error == ""
        assert node.active() == set()

    asyncio.run(go())


def test_a_partition_shared_by_two_claims_stays_until_the_last_goes(node: Node) -> None:
    # NVIDIA skips deactivation while another claim uses the GPUs (consumable shares).
    a = node.add("a", ["gpu-0"])
    b = node.add("b", ["gpu-0"])
    for name in ("a", "b"):
        path = node.root / "claims" / "default" / f"{name}.json"
        claim = json.loads(path.read_text())
        for result in claim["status"]["allocation"]["devices"]["results"]:
            result["shareID"] = f"00000000-0000-0000-0000-00000000000{'1' if name == 'a' else '2'}"
        path.write_text(json.dumps(claim))

    async def go() -> None:
        state = node.state()
        await state.start()
        outcomes = await state.prepare_claims([a, b])
        assert [o.error for o in outcomes.values()] == ["", ""]
        assert node.active() == {3}
        await state.unprepare_claims([a])
        assert node.active() == {3}
        await state.unprepare_claims([b])
        assert node.active() == set()

    asyncio.run(go())


def test_a_malformed_partition_list_stops_the_plugin_as_nvidias(tmp_path: Path) -> None:
    path = tmp_path / "fm.json"
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"id": 1, "active": False, "module_ids": [1, 2]},
                    {"id": 2, "active": False, "module_ids": [1, 3]},
                ],
            }
        )
    )
    with pytest.raises(FabricManagerError, match="also in partition 1"):
        PartitionClaims(FakeFabricManager(path, gpu_count=None))
