"""Recovery never destroys what a CDI spec still serves, and never stops the plugin (issue 23
item 4); two plugin instances on one node decide from the same checkpoint (item 5); device
metadata files are keyed by claim UID (item 7).

In process: the claim engine with the GPU driver on the fake backend (its fake host tree for
passthrough, real fake MPS daemons), the directory claim source, real checkpoint, CDI and
metadata files in temporary directories. Several engines on one plugin directory are what a
surge rollout runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
from collections.abc import Iterator
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
from dra_kubelet_plugin.device_metadata import MetadataFiles
from dra_kubelet_plugin.gpu_driver import GpuDriver, GpuPlan
from dra_kubelet_plugin.gpu_sharing import GpuSharing
from dra_kubelet_plugin.passthrough_claims import PassthroughClaims
from dra_kubelet_plugin.passthrough_devices import Passthrough
from dra_kubelet_plugin.plugin import enumerate_devices
from dra_nvlib import (
    ComputeMode,
    DeviceLibConfig,
    FakeDeviceLib,
    FakePciBus,
    TimeSliceLevel,
    open_device_lib,
)
from dra_sharing import (
    DynamicMig,
    FakeMpsLauncher,
    MpsDaemonManager,
    SharingGates,
    SharingManager,
    TimeSlicer,
)
from kubelet_plugin_support import gpu_config, make_claim, write_claim

DRIVER = "gpu.nvidia.com"
GPU_CONFIG = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"}
MPS = {**GPU_CONFIG, "sharing": {"strategy": "MPS", "mpsConfig": {}}}
LONG_SLICES = {
    **GPU_CONFIG,
    "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}},
}


@dataclass
class Node:
    """One simulated node: fake GPUs, claims on disk, one plugin directory."""

    root: Path
    lib: FakeDeviceLib

    @property
    def plugin(self) -> Path:
        return self.root / "plugin"

    @property
    def checkpoint(self) -> Path:
        return self.plugin / "checkpoint.json"

    @property
    def bus(self) -> FakePciBus:
        bus = self.lib.pci_bus()
        assert isinstance(bus, FakePciBus)
        return bus

    def engine(self) -> tuple[ClaimEngine[GpuPlan], LogEventRecorder]:
        """A plugin instance on this node (several share the plugin directory and lock)."""
        self.plugin.mkdir(parents=True, exist_ok=True)
        passthrough = PassthroughClaims(
            Passthrough(self.bus, host=StandInDeviceNodes(), lib=self.lib, wait_timeout_s=0),
            driver_name=DRIVER,
            metadata=MetadataFiles(self.plugin, driver=DRIVER),
        )
        edits = FakeEdits(self.plugin / "claims")
        manager = SharingManager(
            time_slicer=TimeSlicer(self.lib),
            mps=MpsDaemonManager(self.plugin / "mps", lib=self.lib, launcher=FakeMpsLauncher()),
            dynamic_mig=DynamicMig(self.lib),
        )
        sharing = GpuSharing(
            lib=self.lib,
            manager=manager,
            gates=SharingGates(time_slicing=True, mps=True),
            edits=edits,
        )
        driver = GpuDriver(
            driver_name=DRIVER,
            devices=enumerate_devices(self.lib, passthrough),
            edits=edits,
            sharing=sharing,
            passthrough=passthrough,
        )
        events = LogEventRecorder("n1")
        engine = ClaimEngine(
            driver=driver,
            pool_name="n1",
            claims=DirectoryClaimSource(self.root / "claims"),
            checkpoints=CheckpointStore(self.checkpoint),
            cdi=CDIStore(self.root / "cdi", kind=GPU_CDI),
            lock=NodeLock(self.plugin / "prepare.lock"),
            boot_id="boot-1",
            events=events,
            metrics=PluginMetrics(),
        )
        return engine, events

    def add(self, **claim: Any) -> ClaimRef:
        doc = make_claim(**claim)
        write_claim(self.root / "claims", doc)
        meta = doc["metadata"]
        return ClaimRef(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])

    def bus_id(self, index: int) -> str:
        return self.lib.gpus()[index].pci_bus_id

    def kernel_driver(self, index: int) -> str | None:
        return self.bus.facts(self.bus_id(index)).driver

    def daemon_pids(self) -> list[int]:
        """PIDs of the MPS daemons whose directories are on disk."""
        return [
            int(p.read_text())
            for p in sorted((self.plugin / "mps").glob("*/pipe/nvidia-mps.pid"))
            if p.read_text().strip()
        ]

    def specs(self) -> set[str]:
        return {
            p.name.removeprefix("k8s.gpu.nvidia.com-claim_").removesuffix(".json")
            for p in (self.root / "cdi").glob("k8s.gpu.nvidia.com-claim_*.json")
        }


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="3xH100-80GB",
        fake_state_path=tmp_path / "gpus.json",
    )
    lib = open_device_lib(config)
    assert isinstance(lib, FakeDeviceLib)
    n = Node(root=tmp_path, lib=lib)
    yield n
    # No fake MPS daemon outlives its test.
    MpsDaemonManager(n.plugin / "mps", lib=lib, launcher=FakeMpsLauncher()).stop_unknown(set())
    lib.close()


def _due(engine: ClaimEngine[GpuPlan]) -> bool:
    """Whether recovery runs again at the next cleanup (a call, so that checks of it before
    and after an await are not narrowed away)."""
    return engine.recovery_due


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _newer_version(raw: bytes) -> bytes:
    """The checkpoint as a newer release would write it: version 2, a valid checksum."""
    zero = "sha256:" + "0" * 64
    doc = json.loads(raw)
    doc.update(version=2, checksum=zero)
    body = (json.dumps(doc, indent=2) + "\n").encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return body.replace(zero.encode(), digest.encode(), 1)


@pytest.mark.parametrize(
    ("damage", "reason", "aside"),
    [
        ("corrupt", "CheckpointCorrupt", "checkpoint.json.corrupt-*"),
        ("newer", "CheckpointTooNew", "checkpoint.json.newer-*"),
    ],
)
def test_a_lost_checkpoint_keeps_every_resource_a_spec_serves(
    node: Node, damage: str, reason: str, aside: str
) -> None:
    vm = node.add(name="vm", uid="uid-vm", devices=["gpu-vfio-0"])
    mps = node.add(name="mps", uid="uid-mps", devices=["gpu-1"], configs=[gpu_config(MPS)])
    sliced = node.add(name="ts", uid="uid-ts", devices=["gpu-2"], configs=[gpu_config(LONG_SLICES)])

    async def go() -> None:
        engine, _ = node.engine()
        await engine.start()
        outcomes = await engine.prepare_claims([vm, mps, sliced])
        assert [o.error for o in outcomes.values()] == ["", "", ""]
        (pid,) = node.daemon_pids()
        if damage == "corrupt":
            node.checkpoint.write_bytes(b'{"checksum": "sha256:' + b"1" * 64 + b'"}')
        else:
            node.checkpoint.write_bytes(_newer_version(node.checkpoint.read_bytes()))

        restarted, events = node.engine()
        await restarted.start()
        assert [r for r, _ in events.recorded] == [reason]
        assert "state rebuilt from 3 CDI spec(s)" in events.recorded[0][1]
        assert len(list(node.plugin.glob(aside))) == 1
        # Nothing the running workloads use was torn down.
        assert node.specs() == {"uid-vm", "uid-mps", "uid-ts"}
        assert node.kernel_driver(0) == "vfio-pci", "the VM keeps its GPU"
        assert _alive(pid), "the MPS daemon keeps serving"
        assert node.lib.gpus()[1].compute_mode is ComputeMode.EXCLUSIVE_PROCESS
        assert node.lib.gpus()[2].time_slice is TimeSliceLevel.LONG
        claims = await restarted.prepared_claims()
        assert {u: c.rebuilt for u, c in claims.items()} == {
            "uid-vm": True,
            "uid-mps": True,
            "uid-ts": True,
        }
        assert [d.device_name for d in claims["uid-vm"].devices] == ["gpu-vfio-0"]
        # The periodic pass keeps them too while they are prepared.
        assert _due(restarted)
        await restarted.cleanup_stale()
        assert node.kernel_driver(0) == "vfio-pci"
        assert _alive(pid)

        # The kubelet unprepares them; the next pass removes what was kept for them.
        unprepared = await restarted.unprepare_claims([vm, mps, sliced])
        assert [o.error for o in unprepared.values()] == ["", "", ""]
        await restarted.cleanup_stale()
        assert node.kernel_driver(0) == "nvidia"
        assert not _alive(pid)
        assert node.daemon_pids() == []
        assert node.lib.gpus()[1].compute_mode is ComputeMode.DEFAULT
        assert not _due(restarted)
        assert await restarted.prepared_claims() == {}

    asyncio.run(go())


def test_a_leftover_that_cannot_be_removed_is_retried_while_serving(node: Node) -> None:
    # A GPU left on no driver by a crash mid-switch, which nvidia does not take back yet.
    bus_id = node.bus_id(0)
    node.bus.set_driver_override(bus_id, "vfio-pci")
    node.bus.unbind(bus_id)
    node.bus.fail_next_probes(bus_id, times=1000)
    ref = node.add(name="ctr", uid="uid-ctr", devices=["gpu-1"])

    async def go() -> None:
        engine, events = node.engine()
        await engine.start()  # does not raise: the plugin serves
        assert [r for r, _ in events.recorded] == ["RecoveryIncomplete"]
        assert bus_id in events.recorded[0][1]
        assert _due(engine)
        assert node.kernel_driver(0) is None
        assert (await engine.prepare_claims([ref]))[ref.uid].error == ""

        await engine.cleanup_stale()
        assert _due(engine), "still failing"
        assert len(events.recorded) == 1, "the same failure is evented once"

        (node.bus.root / "fake" / "fail-probe" / bus_id).unlink()
        await engine.cleanup_stale()
        assert not _due(engine)
        assert node.kernel_driver(0) == "nvidia"
        assert set(await engine.prepared_claims()) == {ref.uid}, "the served claim stays"

    asyncio.run(go())


def test_two_instances_count_each_others_time_slices(node: Node) -> None:
    a = node.add(
        name="a",
        uid="uid-a",
        devices=["gpu-0"],
        admin_access=True,
        configs=[gpu_config(LONG_SLICES)],
    )
    b = node.add(
        name="b",
        uid="uid-b",
        devices=["gpu-0"],
        admin_access=True,
        configs=[gpu_config(LONG_SLICES)],
    )

    async def go() -> None:
        first, _ = node.engine()
        second, _ = node.engine()
        await first.start()
        await second.start()
        assert (await first.prepare_claims([a]))[a.uid].error == ""
        assert (await second.prepare_claims([b]))[b.uid].error == ""
        assert set(await second.prepared_claims()) == {a.uid, b.uid}
        assert (await second.unprepare_claims([b]))[b.uid].error == ""
        assert node.lib.gpus()[0].time_slice is TimeSliceLevel.LONG, "claim a still uses it"
        assert (await first.unprepare_claims([a]))[a.uid].error == ""
        assert node.lib.gpus()[0].time_slice is TimeSliceLevel.DEFAULT

    asyncio.run(go())


def test_two_instances_refuse_each_others_passthrough_twins(node: Node) -> None:
    ctr = node.add(name="ctr", uid="uid-ctr", devices=["gpu-1"])
    vm = node.add(name="vm", uid="uid-vm", devices=["gpu-vfio-1"])

    async def go() -> None:
        first, _ = node.engine()
        second, _ = node.engine()
        await first.start()
        await second.start()
        assert (await first.prepare_claims([ctr]))[ctr.uid].error == ""
        refused = (await second.prepare_claims([vm]))[vm.uid]
        assert "gpu-vfio-1 is the same GPU" in refused.error
        assert "uid-ctr" in refused.error
        assert node.kernel_driver(1) == "nvidia", "the container keeps its GPU"
        # Once the other instance unprepared it, the twin is free for this one.
        assert (await first.unprepare_claims([ctr]))[ctr.uid].error == ""
        assert (await second.prepare_claims([vm]))[vm.uid].error == ""
        assert node.kernel_driver(1) == "vfio-pci"
        assert (await second.unprepare_claims([vm]))[vm.uid].error == ""

    asyncio.run(go())


def test_two_instances_share_a_passthrough_gpu_until_its_last_claim_goes(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    # Two VMs share gpu-vfio-0 (admin access); each instance prepares and unprepares one,
    # interleaved, each deciding from what the other did since (no state of its own).
    a = node.add(name="a", uid="uid-a", devices=["gpu-vfio-0"], admin_access=True)
    b = node.add(name="b", uid="uid-b", devices=["gpu-vfio-0"], admin_access=True)
    ctr = node.add(name="ctr", uid="uid-ctr", devices=["gpu-0"])
    gpu0 = node.lib.gpus()[0].uuid
    caplog.set_level(logging.INFO)

    async def go() -> None:
        first, _ = node.engine()
        second, _ = node.engine()
        await first.start()
        await second.start()
        assert (await first.prepare_claims([a]))[a.uid].error == ""
        # The driver loses the GPU's persistence mode while vfio-pci holds it.
        node.lib.set_persistence_mode(gpu0, enabled=False)
        assert (await second.prepare_claims([b]))[b.uid].error == ""
        assert node.kernel_driver(0) == "vfio-pci"
        bound = [r for r in caplog.records if getattr(r, "event", None) == "vfio_bound"]
        assert len(bound) == 1, "bound once, for the first VM"
        claims = await first.prepared_claims()
        assert claims[b.uid].devices[0].driver_state == claims[a.uid].devices[0].driver_state, (
            "the second VM records the GPU as it was before passthrough"
        )

        assert (await first.unprepare_claims([a]))[a.uid].error == ""
        assert node.kernel_driver(0) == "vfio-pci", "uid-b's VM still has the GPU"
        # The first instance saw uid-a go, not uid-b come: the twin is still refused.
        refused = (await first.prepare_claims([ctr]))[ctr.uid]
        assert "uid-b" in refused.error
        assert node.kernel_driver(0) == "vfio-pci"

        assert (await second.unprepare_claims([b]))[b.uid].error == ""
        assert node.kernel_driver(0) == "nvidia"
        assert node.lib.persistence_mode(gpu0) is True, "restored by the last claim's release"
        assert (await first.prepare_claims([ctr]))[ctr.uid].error == ""
        assert (await first.unprepare_claims([ctr]))[ctr.uid].error == ""
        assert await second.prepared_claims() == {}

    asyncio.run(go())


def test_metadata_files_are_keyed_by_claim_uid(node: Node) -> None:
    old = node.add(name="vm", uid="uid-old", devices=["gpu-vfio-0"])
    root = node.plugin / "dra-device-metadata"
    # Left by an earlier release (keyed by namespace and name) for a claim no longer known.
    (root / "default_gone" / "gpu").mkdir(parents=True)

    async def go() -> None:
        engine, _ = node.engine()
        await engine.start()
        assert not (root / "default_gone").exists()
        assert (await engine.prepare_claims([old]))[old.uid].error == ""
        # The claim is deleted and recreated under the same name before the old one's
        # unprepare: each UID has its own files.
        new = node.add(name="vm", uid="uid-new", devices=["gpu-vfio-1"])
        assert (await engine.prepare_claims([new]))[new.uid].error == ""
        assert {p.name for p in root.iterdir()} == {"uid-old", "uid-new"}
        assert (await engine.unprepare_claims([old]))[old.uid].error == ""
        written = json.loads((root / "uid-new" / "gpu" / "metadata.json").read_text())
        assert written["metadata"] == {"name": "vm", "namespace": "default", "uid": "uid-new"}
        spec = (node.root / "cdi" / "k8s.gpu.nvidia.com-claim_uid-new.json").read_text()
        assert str(root / "uid-new" / "gpu" / "metadata.json") in spec
        assert (await engine.unprepare_claims([new]))[new.uid].error == ""
        assert list(root.iterdir()) == []

    asyncio.run(go())
