"""Dynamic MIG on the harness cluster with the chart (gate DynamicMIG on): the A100s are
published as partitionable devices (a counter set each, every placement a device), NVIDIA's
gpu-test4 demo runs unchanged with its four replicas, each pod's containers list the MIG
devices created for them, and the instances are destroyed when the pods go."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from demo_specs import demo, namespaces_of
from dra_e2e.handle import ClusterHandle
from dra_nvlib import FakeDeviceLib
from driver_support import Driver, applied, install, uninstall
from sharing_support import fake_gpu_state, logs_of, running_pods

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

VALUES = {"featureGates.DynamicMIG": "true"}
MIG_LINE = re.compile(r"^\s+MIG (\S+)\s+Device\s+\d+: \(UUID: (MIG-[0-9a-f-]+)\)$", re.M)
GPU_LINE = re.compile(r"^GPU \d+: .* \(UUID: (GPU-[0-9a-f-]+)\)$", re.M)


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart with dynamic MIG; afterwards the fake A100s leave MIG mode again."""
    installed = install(e2e_cluster, tmp_path_factory.mktemp("driver-images"), VALUES)
    yield installed
    uninstall(installed)
    if installed.local:
        # Ampere keeps MIG mode after its last MIG device (NVIDIA disables it on Hopper+
        # only); the next module's install must find full GPUs, as a reset would leave them.
        for node in installed.nodes:
            state = installed.plugin_dir(node) / "fake-gpus.json"
            lib = FakeDeviceLib.open(state_path=state, fleet=None, node_name=node)
            for gpu in lib.gpus():
                if gpu.mig_mode.current and not gpu.mig_devices:
                    lib.set_mig_mode(gpu.uuid, enabled=False)


def test_partitionable_slices(driver: Driver) -> None:
    slices = driver.slices(driver.nodes[0])
    sets = [cs["name"] for s in slices for cs in s["spec"].get("sharedCounters", [])]
    # 4xA100-40GB,4xL4: the A100s have counters, the L4s cannot do MIG (NVIDIA #1092).
    assert sorted(sets) == [f"gpu-{i}-counter-set" for i in range(4)]
    devices = driver.devices(driver.nodes[0])
    assert "gpu-0-mig-3g20gb-9-4" in devices
    assert devices["gpu-0"]["consumesCounters"][0]["counterSet"] == "gpu-0-counter-set"
    assert "consumesCounters" not in devices["gpu-4"]


def test_gpu_test4_mig_devices_created_on_demand(driver: Driver) -> None:
    cluster, manifest = driver.cluster, demo("quickstart_v1_gpu-test4.yaml")
    node = driver.nodes[0]
    wanted = {"ctr0": "1g.5gb", "ctr1": "1g.5gb", "ctr2": "2g.10gb", "ctr3": "3g.20gb"}
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        pods = running_pods(cluster, "gpu-test4", 4)
        parents = set()
        for name in pods:
            seen: dict[str, str] = {}
            pod_parents = set()
            for ctr, profile in wanted.items():
                log = logs_of(cluster, name, "gpu-test4", ctr, "MIG")
                ((shown, uuid),) = MIG_LINE.findall(log)
                assert shown == profile, log
                seen[ctr] = uuid
                pod_parents.update(GPU_LINE.findall(log))
            assert len(set(seen.values())) == 4, "four distinct MIG devices"
            assert len(pod_parents) == 1, "matchAttribute parentUUID: one GPU per pod"
            parents |= pod_parents
        assert len(parents) == 4, "the four replicas fill the four A100s"
        state = fake_gpu_state(driver, node)
        assert all(len(state[p]["gpu_instances"]) == 4 for p in parents)
    cluster.wait_until(
        "the MIG devices destroyed at unprepare",
        lambda: all(not fake_gpu_state(driver, node)[p]["gpu_instances"] for p in parents),
        timeout=120,
    )
