"""The driver core in process: prepare/unprepare against the directory claim source (the test
double of the API server), with the fake GPU backend and real files in temp directories."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from dra_kubelet_core.cdi_store import CDIStore
from dra_kubelet_core.checkpoint import (
    CheckpointStore,
    ClaimState,
    decode_checkpoint,
    encode_checkpoint,
)
from dra_kubelet_core.claim_source import DirectoryClaimSource
from dra_kubelet_core.errors import ClaimRef
from dra_kubelet_core.events import LogEventRecorder
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.node_lock import NodeLock
from dra_kubelet_core.state import ClaimEngine
from dra_kubelet_plugin.cdi import GPU_CDI
from dra_kubelet_plugin.container_edits import FakeEdits
from dra_kubelet_plugin.gpu_driver import GpuDriver, GpuPlan
from dra_kubelet_plugin.inventory import NodeDevice, build_inventory
from dra_nvlib import DeviceLibConfig, open_device_lib
from kubelet_plugin_support import gpu_config, make_claim, write_claim

GPU_CONFIG = {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"}
TIME_SLICING = {**GPU_CONFIG, "sharing": {"strategy": "TimeSlicing"}}


@dataclass
class Node:
    """One simulated node: directories, devices, and a factory for (re)started states."""

    root: Path
    devices: list[NodeDevice]
    boot_id: str = "boot-1"

    @property
    def claims_dir(self) -> Path:
        return self.root / "claims"

    @property
    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    @property
    def checkpoint(self) -> Path:
        return self.root / "plugin" / "checkpoint.json"

    def state(self, events: LogEventRecorder | None = None) -> ClaimEngine[GpuPlan]:
        (self.root / "plugin").mkdir(parents=True, exist_ok=True)
        driver = GpuDriver(
            driver_name="gpu.nvidia.com",
            devices=self.devices,
            edits=FakeEdits(self.root / "plugin" / "claims"),
        )
        return ClaimEngine(
            driver=driver,
            pool_name="n1",
            claims=DirectoryClaimSource(self.claims_dir),
            checkpoints=CheckpointStore(self.checkpoint),
            cdi=CDIStore(self.cdi_dir, kind=GPU_CDI),
            lock=NodeLock(self.root / "plugin" / "prepare.lock"),
            boot_id=self.boot_id,
            events=events or LogEventRecorder("n1"),
            metrics=PluginMetrics(),
        )

    def add(self, claim: dict[str, Any]) -> ClaimRef:
        write_claim(self.claims_dir, claim)
        meta = claim["metadata"]
        return ClaimRef(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])

    def spec_path(self, uid: str) -> Path:
        return self.cdi_dir / f"k8s.gpu.nvidia.com-claim_{uid}.json"


@pytest.fixture
def node(tmp_path: Path) -> Node:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="4xH100-80GB",
        fake_state_path=tmp_path / "fake.json",
    )
    with open_device_lib(config) as lib:
        devices = build_inventory(lib.gpus())
    return Node(root=tmp_path, devices=devices)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def started(node: Node, events: LogEventRecorder | None = None) -> ClaimEngine[GpuPlan]:
    state = node.state(events)
    await state.start()
    return state


def test_prepare_returns_base_request_names_and_only_this_drivers_results(node: Node) -> None:
    claim = make_claim(name="c", devices=[("gpu/large", "gpu-1"), ("nic", "eth0")], configs=[])
    claim["status"]["allocation"]["devices"]["results"][1]["driver"] = "net.example.com"
    ref = node.add(claim)

    async def go() -> None:
        state = await started(node)
        outcome = (await state.prepare_claims([ref]))[ref.uid]
        assert outcome.error == ""
        assert [(d.request_names, d.device_name) for d in outcome.devices] == [(("gpu",), "gpu-1")]

    run(go())


def test_prepared_claim_is_returned_unchanged_after_a_restart(node: Node) -> None:
    ref = node.add(make_claim(name="c", devices=["gpu-0", "gpu-2"]))

    async def go() -> None:
        first = (await (await started(node)).prepare_claims([ref]))[ref.uid]
        # The claim disappears from the API server: a restarted plugin still answers from
        # its checkpoint without asking (the kubelet may retry after we already prepared).
        (node.claims_dir / "default" / "c.json").unlink()
        again = (await (await started(node)).prepare_claims([ref]))[ref.uid]
        assert again == first

    run(go())


def test_class_then_claim_configs_later_wins_and_targets_requests(node: Node) -> None:
    cases = {
        # claim config (later) without sharing overrides a class config with sharing
        "claim-wins": (
            [gpu_config(TIME_SLICING, source="FromClass"), gpu_config(GPU_CONFIG)],
            "",
        ),
        # claim config with sharing overrides the class default -> rejected at prepare
        "sharing": (
            [gpu_config(GPU_CONFIG, source="FromClass"), gpu_config(TIME_SLICING)],
            "sharing",
        ),
        # a config aimed at another request does not apply
        "targeted": ([gpu_config(TIME_SLICING, requests=["other"])], ""),
        # a config naming the parent request applies to its subrequest results
        "parent": ([gpu_config(TIME_SLICING, requests=["gpu"])], "sharing"),
        # configs of other drivers are ignored, even invalid ones
        "foreign": (
            [
                {
                    "source": "FromClaim",
                    "opaque": {"driver": "x.example.com", "parameters": {"a": 1}},
                }
            ],
            "",
        ),
    }

    async def go() -> None:
        state = await started(node)
        for i, (name, (configs, expected)) in enumerate(cases.items()):
            claim = make_claim(name=name, devices=[("gpu/small", f"gpu-{i % 4}")], configs=configs)
            ref = node.add(claim)
            outcome = (await state.prepare_claims([ref]))[ref.uid]
            if expected:
                assert expected in outcome.error, name
                assert "status.allocation.devices.config[1]" in outcome.error or name == "parent"
                assert outcome.reason == "UnsupportedConfig"
            else:
                assert outcome.error == "", (name, outcome.error)
                await state.unprepare_claims([ref])

    run(go())


def test_invalid_or_mistyped_config_is_a_per_claim_error_naming_field_and_device(
    node: Node,
) -> None:
    unknown_field = gpu_config({**GPU_CONFIG, "sharring": {}})
    mig_on_gpu = gpu_config(
        {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "MigDeviceConfig"}
    )
    bad_version = gpu_config({"apiVersion": "resource.nvidia.com/v1", "kind": "GpuConfig"})

    async def go() -> None:
        state = await started(node)
        for name, config, words in (
            ("unknown-field", unknown_field, ["sharring"]),
            ("mig-on-gpu", mig_on_gpu, ["MigDeviceConfig", "gpu-0", "GpuConfig"]),
            ("bad-version", bad_version, ["apiVersion"]),
        ):
            ref = node.add(make_claim(name=name, devices=["gpu-0"], configs=[config]))
            outcome = (await state.prepare_claims([ref]))[ref.uid]
            assert outcome.reason == "DeviceConfig", outcome.error
            assert "status.allocation.devices.config[0].opaque.parameters" in outcome.error
            assert f"default/{name}" in outcome.error
            for word in words:
                assert word in outcome.error, (name, outcome.error)
            assert not node.spec_path(ref.uid).exists()

    run(go())


def test_a_device_is_never_prepared_for_two_claims(node: Node) -> None:
    first = node.add(make_claim(name="a", devices=["gpu-1"]))
    second = node.add(make_claim(name="b", devices=["gpu-1"]))
    admin = node.add(make_claim(name="admin", devices=["gpu-1"], admin_access=True))

    async def go() -> None:
        state = await started(node)
        assert (await state.prepare_claims([first]))[first.uid].error == ""
        clash = (await state.prepare_claims([second]))[second.uid]
        assert clash.reason == "DeviceInUse"
        assert "gpu-1" in clash.error
        assert "default/a" in clash.error
        assert not node.spec_path(second.uid).exists()
        # Admin access (monitoring) is exempt.
        assert (await state.prepare_claims([admin]))[admin.uid].error == ""
        # Force-deleted pod: claim "a" is gone from the API server and was never
        # unprepared; the guard checks, cleans it up and lets "b" through.
        (node.claims_dir / "default" / "a.json").unlink()
        assert (await state.prepare_claims([second]))[second.uid].error == ""
        assert not node.spec_path(first.uid).exists()
        assert first.uid not in await state.prepared_claims()

    run(go())


def test_reboot_discards_prepared_state_so_claims_are_prepared_again(node: Node) -> None:
    ref = node.add(make_claim(name="c", devices=["gpu-0"]))

    async def go() -> None:
        state = await started(node)
        await state.prepare_claims([ref])
        node.boot_id = "boot-2"
        rebooted = await started(node)
        assert await rebooted.prepared_claims() == {}
        assert not node.spec_path(ref.uid).exists()
        again = (await rebooted.prepare_claims([ref]))[ref.uid]
        assert again.error == ""
        assert node.spec_path(ref.uid).exists()

    run(go())


def test_corrupt_checkpoint_is_moved_aside_reported_and_rebuilt_from_cdi_specs(
    node: Node,
) -> None:
    a = node.add(make_claim(name="a", devices=["gpu-0"]))
    b = node.add(make_claim(name="b", devices=["gpu-0"]))

    async def go() -> None:
        state = await started(node)
        await state.prepare_claims([a])
        raw = node.checkpoint.read_bytes()
        node.checkpoint.write_bytes(raw.replace(b"PrepareCompleted", b"PrepareCompletes"))
        events = LogEventRecorder("n1")
        restarted = await started(node, events)
        assert [r for r, _ in events.recorded] == ["CheckpointCorrupt"]
        assert "checksum mismatch" in events.recorded[0][1]
        aside = list(node.checkpoint.parent.glob("checkpoint.json.corrupt-*"))
        assert len(aside) == 1
        assert aside[0].read_bytes() != node.checkpoint.read_bytes()
        claims = await restarted.prepared_claims()
        assert claims[a.uid].state is ClaimState.PREPARE_STARTED
        assert [d.device_name for d in claims[a.uid].devices] == ["gpu-0"]
        # The rebuilt entry still protects gpu-0 ...
        assert "already prepared" in (await restarted.prepare_claims([b]))[b.uid].error
        # ... and the kubelet's retry completes claim a with full data.
        done = (await restarted.prepare_claims([a]))[a.uid]
        assert [d.request_names for d in done.devices] == [("gpu",)]
        assert (await restarted.prepared_claims())[a.uid].state is ClaimState.PREPARE_COMPLETED

    run(go())


def test_start_removes_leftover_specs_and_stale_half_prepared_claims(node: Node) -> None:
    kept = node.add(make_claim(name="kept", devices=["gpu-0"]))
    gone = node.add(make_claim(name="gone", devices=["gpu-1"]))

    async def go() -> None:
        state = await started(node)
        await state.prepare_claims([kept, gone])
        # Simulate a crash between PrepareStarted and PrepareCompleted for "gone"...
        cp = decode_checkpoint(node.checkpoint.read_bytes())
        cp.claims[gone.uid] = replace(cp.claims[gone.uid], state=ClaimState.PREPARE_STARTED)
        node.checkpoint.write_bytes(encode_checkpoint(cp))
        # ... after which its ResourceClaim was deleted; and a spec of an unknown claim.
        (node.claims_dir / "default" / "gone.json").unlink()
        stray = node.spec_path(str(uuid.uuid4()))
        stray.write_text(node.spec_path(kept.uid).read_text())
        restarted = await started(node)
        claims = await restarted.prepared_claims()
        assert set(claims) == {kept.uid}
        assert not stray.exists()
        assert not node.spec_path(gone.uid).exists()
        assert node.spec_path(kept.uid).exists()

    run(go())


def test_fake_cdi_spec_carries_env_device_nodes_and_the_fake_nvidia_smi(node: Node) -> None:
    ref = node.add(make_claim(name="c", devices=["gpu-1", "gpu-3"]))

    async def go() -> None:
        state = await started(node)
        await state.prepare_claims([ref])

    run(go())
    spec = json.loads(node.spec_path(ref.uid).read_text())
    assert spec["cdiVersion"] == "0.5.0"  # hostPath on device nodes needs 0.5.0
    by_name = {d["name"]: d["containerEdits"] for d in spec["devices"]}
    gpu1 = next(d for d in node.devices if d.name == "gpu-1")
    assert f"NVIDIA_FAKE_GPU_1_UUID={gpu1.uuid}" in by_name[f"{ref.uid}-gpu-1"]["env"]
    assert by_name[f"{ref.uid}-gpu-1"]["deviceNodes"] == [
        {"path": "/dev/nvidia1", "hostPath": "/dev/null"}
    ]
    common = spec["containerEdits"]
    (mount,) = common["mounts"]
    assert mount["containerPath"] == "/usr/bin/nvidia-smi"
    gpu3 = next(d for d in node.devices if d.name == "gpu-3")
    assert _nvidia_smi_in_container([spec]) == [
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu1.uuid})",
        f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {gpu3.uuid})",
    ]


def _nvidia_smi_in_container(specs: list[dict[str, Any]]) -> list[str]:
    """``nvidia-smi -L`` in a container given every device of ``specs``, composed as CDI
    composes edits: env merged by name, the last mount of a path wins."""
    env: dict[str, str] = {"PATH": "/nonexistent"}
    script = ""
    for spec in specs:
        edits = [spec["containerEdits"], *(d["containerEdits"] for d in spec["devices"])]
        for edit in edits:
            env.update(e.split("=", 1) for e in edit.get("env", []))
            for mount in edit.get("mounts", []):
                if mount["containerPath"] == "/usr/bin/nvidia-smi":
                    script = mount["hostPath"]
    out = subprocess.run(
        ["/bin/sh", script, "-L"], capture_output=True, text=True, env=env, check=True
    )
    return out.stdout.splitlines()


def test_fake_nvidia_smi_lists_the_devices_of_every_claim_of_a_container(node: Node) -> None:
    # One container referencing two claims of one GPU each, and a third claim it does not get.
    a = node.add(make_claim(name="a", devices=["gpu-2"]))
    b = node.add(make_claim(name="b", devices=["gpu-0"]))
    other = node.add(make_claim(name="other", devices=["gpu-1"]))

    async def go() -> None:
        state = await started(node)
        results = await state.prepare_claims([a, b, other])
        assert all(r.error == "" for r in results.values())

    run(go())
    specs = [json.loads(node.spec_path(ref.uid).read_text()) for ref in (a, b)]
    gpu = {d.name: d for d in node.devices}
    expected = [
        f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu['gpu-0'].uuid})",
        f"GPU 1: NVIDIA H100 80GB HBM3 (UUID: {gpu['gpu-2'].uuid})",
    ]
    assert _nvidia_smi_in_container(specs) == expected
    assert _nvidia_smi_in_container(list(reversed(specs))) == expected


def test_mig_device_is_prepared_with_its_own_config_type(tmp_path: Path) -> None:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="1xA100-40GB:mig",
        fake_state_path=tmp_path / "fake.json",
    )
    with open_device_lib(config) as lib:
        parent = lib.gpus()[0]
        mig = lib.create_mig_device(parent.uuid, profile_id=19, placement_start=0)
        devices = build_inventory(lib.gpus())
    node = Node(root=tmp_path, devices=devices)
    name = devices[0].name
    mig_config = gpu_config({**GPU_CONFIG, "kind": "MigDeviceConfig"})
    ok = node.add(make_claim(name="mig", devices=[name], configs=[mig_config]))
    wrong = node.add(make_claim(name="wrong", devices=[name], configs=[gpu_config(GPU_CONFIG)]))

    async def go() -> None:
        state = await started(node)
        bad = (await state.prepare_claims([wrong]))[wrong.uid]
        assert "GpuConfig cannot configure mig device" in bad.error
        good = (await state.prepare_claims([ok]))[ok.uid]
        assert good.error == ""

    run(go())
    spec = json.loads(node.spec_path(ok.uid).read_text())
    (device,) = spec["devices"]
    assert (
        f"NVIDIA_FAKE_{name.upper().replace('-', '_')}_UUID={mig.uuid}"
        in device["containerEdits"]["env"]
    )
    assert _nvidia_smi_in_container([spec]) == [
        f"GPU 0: {parent.product_name} (UUID: {parent.uuid})",
        f"  MIG {mig.profile_name:<11} Device  0: (UUID: {mig.uuid})",
    ]


def test_checkpoint_write_failure_is_a_per_claim_error_and_nothing_is_half_written(
    node: Node,
) -> None:
    a = node.add(make_claim(name="a", devices=["gpu-0"]))
    b = node.add(make_claim(name="b", devices=["gpu-1"]))

    async def go() -> None:
        state = await started(node)
        before = node.checkpoint.read_bytes()
        # Something occupies the temp file's name: the checkpoint cannot be written.
        blocker = node.checkpoint.parent / f".checkpoint.json.tmp-{os.getpid()}"
        blocker.mkdir()
        outcomes = await state.prepare_claims([a, b])
        for ref in (a, b):
            assert "checkpoint" in outcomes[ref.uid].error
            assert outcomes[ref.uid].reason == "Checkpoint"
            assert not node.spec_path(ref.uid).exists()
        assert node.checkpoint.read_bytes() == before
        blocker.rmdir()
        retried = await state.prepare_claims([a, b])
        assert all(o.error == "" for o in retried.values())

    run(go())
