"""ResourceSlice building (pure), the --print-resource-slices CLI, and publishing through the
shared in-memory API server (``dra_kube_client.testing``)."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_api_types import ResourceSlice, ValidationError
from dra_kube_client import KubeApiError
from dra_kube_client.testing import MemoryApi
from dra_kubelet_core.health import DeviceHealth, HealthHub
from dra_kubelet_core.metrics import PluginMetrics
from dra_kubelet_core.publisher import SlicePublisher
from dra_kubelet_plugin.device_taints import TAINT_XID
from dra_kubelet_plugin.inventory import build_inventory
from dra_kubelet_plugin.slices import SliceSpec, build_resource_slices, gpu_slice_source, semver_of
from dra_nvlib import DeviceLibConfig, GpuInfo, open_device_lib

SPEC = SliceSpec(driver_name="gpu.nvidia.com", node_name="n1", node_uid="node-uid-1")


def fake_gpus(tmp_path: Path, fleet: str) -> tuple[GpuInfo, ...]:
    config = DeviceLibConfig(
        backend="fake", node_name="n1", fake_fleet=fleet, fake_state_path=tmp_path / "f.json"
    )
    with open_device_lib(config) as lib:
        return lib.gpus()


def test_slice_has_the_seed_article_attributes_and_validates(tmp_path: Path) -> None:
    devices = build_inventory(fake_gpus(tmp_path, "2xH100-80GB"))
    (data,) = build_resource_slices(SPEC, devices, generation=3)
    parsed = ResourceSlice.from_dict(data, validate=True)
    assert parsed.spec.pool.name == "n1"
    assert parsed.spec.pool.generation == 3
    assert parsed.spec.pool.resource_slice_count == 1
    owner = data["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Node", "n1", "node-uid-1")
    gpu0 = data["spec"]["devices"][0]
    assert gpu0["name"] == "gpu-0"
    attrs = gpu0["attributes"]
    assert attrs["type"] == {"string": "gpu"}
    assert attrs["brand"] == {"string": "Nvidia"}
    assert attrs["architecture"] == {"string": "Hopper"}
    assert attrs["productName"]["string"].startswith("NVIDIA H100")
    assert attrs["cudaComputeCapability"] == {"version": "9.0.0"}
    for key in ("driverVersion", "cudaDriverVersion"):
        assert "version" in attrs[key]
    assert attrs["uuid"]["string"].startswith("GPU-")
    assert "resource.kubernetes.io/pciBusID" in attrs
    assert "resource.kubernetes.io/pcieRoot" in attrs
    assert gpu0["capacity"]["memory"]["value"].endswith("Mi")


def test_numa_node_is_published_next_to_pcie_root(tmp_path: Path) -> None:
    devices = build_inventory(fake_gpus(tmp_path, "8xH100-80GB"))
    (data,) = build_resource_slices(SPEC, devices, generation=1)
    ResourceSlice.from_dict(data, validate=True)
    numa = [d["attributes"]["resource.kubernetes.io/numaNode"] for d in data["spec"]["devices"]]
    assert numa == [{"int": 0}] * 4 + [{"int": 1}] * 4


def test_gpu_without_reported_memory_has_no_memory_capacity(tmp_path: Path) -> None:
    # Unified-memory GPUs: NVML answers NOT_SUPPORTED for the memory size.
    (gpu,) = fake_gpus(tmp_path, "1xH100-80GB")
    gpu = dataclasses.replace(gpu, memory_bytes=None, numa_node=None)
    (data,) = build_resource_slices(SPEC, build_inventory((gpu,)), generation=1)
    ResourceSlice.from_dict(data, validate=True)
    (device,) = data["spec"]["devices"]
    assert "memory" not in device.get("capacity", {})
    assert "resource.kubernetes.io/numaNode" not in device["attributes"]


def test_versions_are_normalized_to_semver() -> None:
    assert semver_of("9.0") == "9.0.0"
    assert semver_of("535.104.05") == "535.104.5"
    assert semver_of("12.8") == "12.8.0"


def test_mig_enabled_gpu_publishes_static_mig_devices_and_hides_the_parent(
    tmp_path: Path,
) -> None:
    config = DeviceLibConfig(
        backend="fake",
        node_name="n1",
        fake_fleet="1xA100-40GB:mig,1xA100-40GB",
        fake_state_path=tmp_path / "f.json",
    )
    with open_device_lib(config) as lib:
        parent = lib.gpus()[0]
        lib.create_mig_device(parent.uuid, profile_id=19, placement_start=0)
        lib.create_mig_device(parent.uuid, profile_id=15, placement_start=2)
        devices = build_inventory(lib.gpus())
    names = [d.name for d in devices]
    assert names == ["gpu-0-mig-1g5gb-19-0", "gpu-0-mig-1g10gb-15-2", "gpu-1"]
    (data,) = build_resource_slices(SPEC, devices, generation=1)
    ResourceSlice.from_dict(data, validate=True)
    mig = data["spec"]["devices"][0]
    assert mig["attributes"]["type"] == {"string": "mig"}
    assert mig["attributes"]["parentUUID"] == {"string": parent.uuid}
    assert mig["attributes"]["profile"] == {"string": "1g.5gb"}
    assert {"multiprocessors", "copyEngines", "decoders", "memory"} <= set(mig["capacity"])


def test_split_at_128_devices_or_64_with_taints(tmp_path: Path) -> None:
    one = build_inventory(fake_gpus(tmp_path, "1xH100-80GB"))[0]
    many = [one.__class__(**{**one.__dict__, "name": f"gpu-{i}"}) for i in range(130)]
    slices = build_resource_slices(SPEC, many, generation=1)
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 2]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {2}
    health = {"gpu-0": DeviceHealth("gpu-0", healthy=False, taint_key=TAINT_XID, taint_value="79")}
    tainted = build_resource_slices(SPEC, many, generation=1, health=health)
    assert [len(s["spec"]["devices"]) for s in tainted] == [64, 64, 2]
    taint = tainted[0]["spec"]["devices"][0]["taints"][0]
    assert taint == {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    for s in tainted:
        ResourceSlice.from_dict(s, validate=True)


def test_print_resource_slices_cli_prints_a_valid_v1_slice(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dra_kubelet_plugin",
            "--device-backend",
            "fake",
            "--fake-gpus",
            "8xH100-80GB",
            "--node-name",
            "n1",
            "--print-resource-slices",
            "--fake-gpu-state-file",
            str(tmp_path / "state.json"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    (doc,) = list(yaml.safe_load_all(out.stdout))
    assert doc["apiVersion"] == "resource.k8s.io/v1"
    assert doc["kind"] == "ResourceSlice"
    slice_ = ResourceSlice.from_dict(doc, validate=True)
    assert [d.name for d in slice_.spec.devices or []] == [f"gpu-{i}" for i in range(8)]
    assert slice_.spec.driver == "gpu.nvidia.com"
    assert slice_.spec.node_name == "n1"


SLICES = "/apis/resource.k8s.io/v1/resourceslices"


class SliceApi(MemoryApi):
    """The shared in-memory API server, validating slices as the kube-apiserver does."""

    def __init__(self, *, drop_taints: bool = False) -> None:
        # drop_taints: store slices as a server with the DRADeviceTaints gate off does.
        super().__init__(watch_wait_s=2.0)
        self.drop_taints = drop_taints
        self.writes = 0

    def admit(self, method: str, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Validate the slice, drop taints when asked, count the write."""
        try:
            ResourceSlice.from_dict(obj, validate=True)
        except ValidationError as exc:
            raise KubeApiError(method, path, 422, str(exc), reason="Invalid") from exc
        if self.drop_taints:
            for device in obj["spec"].get("devices") or []:
                device.pop("taints", None)
        self.writes += 1
        return obj

    def slices(self) -> dict[str, dict[str, Any]]:
        """The stored slices by name."""
        return {o["metadata"]["name"]: o for o in self.kind_items("resourceslices")}


def test_publisher_creates_republishes_after_deletion_and_taints_unhealthy_devices(
    tmp_path: Path,
) -> None:
    devices = build_inventory(fake_gpus(tmp_path, "4xH100-80GB"))
    api = SliceApi()

    async def go() -> None:
        hub = HealthHub("n1")
        await hub.set_devices(d.name for d in devices)
        publisher = SlicePublisher(
            transport=api,
            driver_name=SPEC.driver_name,
            node_name=SPEC.node_name,
            slices=gpu_slice_source(SPEC, lambda: devices, hub),
            health=hub,
            metrics=PluginMetrics(),
            resync_s=60,
        )
        task = asyncio.get_running_loop().create_task(publisher.run())

        async def until(check: Any, what: str) -> None:
            for _ in range(100):
                if check():
                    return
                await asyncio.sleep(0.05)
            raise AssertionError(f"timed out waiting for {what}: {api.slices()}")

        await until(lambda: len(api.slices()) == 1, "first publication")
        (name,) = api.slices()
        assert api.slices()[name]["spec"]["pool"]["generation"] == 1
        writes = api.writes
        assert publisher.reconcile_once() is False  # nothing changed: no write
        assert api.writes == writes

        api.request("DELETE", f"{SLICES}/{name}")  # the kubelet wipes the node's slices
        await until(lambda: len(api.slices()) == 1, "republication")
        (again,) = api.slices().values()
        assert again["spec"]["pool"]["generation"] == 2  # generations are never reused

        await hub.mark_unhealthy("gpu-2", message="XID 79", taint_key=TAINT_XID, taint_value="79")

        def tainted() -> bool:
            (obj,) = api.slices().values()
            return "taints" in obj["spec"]["devices"][2]

        await until(tainted, "taint")
        (obj,) = api.slices().values()
        assert obj["spec"]["pool"]["generation"] == 3
        assert obj["spec"]["devices"][2]["taints"] == [
            {"key": TAINT_XID, "value": "79", "effect": "NoSchedule"}
        ]
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())


def test_publisher_writes_once_when_the_server_drops_taints(tmp_path: Path) -> None:
    devices = build_inventory(fake_gpus(tmp_path, "4xH100-80GB"))
    api = SliceApi(drop_taints=True)

    async def go() -> None:
        hub = HealthHub("n1")
        await hub.set_devices(d.name for d in devices)
        await hub.mark_unhealthy("gpu-1", message="XID 79", taint_key=TAINT_XID, taint_value="79")
        publisher = SlicePublisher(
            transport=api,
            driver_name=SPEC.driver_name,
            node_name=SPEC.node_name,
            slices=gpu_slice_source(SPEC, lambda: devices, hub),
            health=hub,
            metrics=PluginMetrics(),
        )
        assert publisher.reconcile_once() is True
        for _ in range(5):
            assert publisher.reconcile_once() is False
        assert api.writes == 1
        (obj,) = api.slices().values()
        assert obj["spec"]["pool"]["generation"] == 1
        assert "taints" not in obj["spec"]["devices"][1]

        # Recovery: the server already holds the untainted device, nothing to write.
        await hub.mark_healthy("gpu-1")
        assert publisher.reconcile_once() is False
        # A change of what we send is written, once, though the server drops it again.
        await hub.mark_unhealthy("gpu-3", message="XID 48", taint_key=TAINT_XID, taint_value="48")
        assert publisher.reconcile_once() is True
        assert publisher.reconcile_once() is False
        assert api.writes == 2
        assert api.slices()[next(iter(api.slices()))]["spec"]["pool"]["generation"] == 2

        # Someone else's change of the stored slice is repaired (compared afresh).
        (name,) = api.slices()
        changed = copy.deepcopy(api.slices()[name])
        changed["spec"]["devices"] = changed["spec"]["devices"][:1]
        api.request("PUT", f"{SLICES}/{name}", body=changed)
        assert publisher.reconcile_once() is True
        assert len(api.slices()[name]["spec"]["devices"]) == 4
        assert publisher.reconcile_once() is False

    asyncio.run(go())
