"""Time-slicing and MPS on the harness cluster with the chart (gates TimeSlicingSettings and
MPSSupport on): NVIDIA's gpu-test5 and gpu-test-mps demos run unchanged, every pod runs, and
inside each container the fake ``nvidia-smi`` (and MPS client) shows the sharing asked for;
after the pods go, the GPUs are back to compute mode Default and the Default time-slice."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from demo_specs import demo, namespaces_of
from dra_e2e.handle import ClusterHandle
from driver_support import Driver, allocated_devices, applied, install, pod_claims, uninstall
from sharing_support import fake_gpu_state, logs_of, running_pods

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

VALUES = {"featureGates.TimeSlicingSettings": "true", "featureGates.MPSSupport": "true"}
COMPUTE_MODE = re.compile(r"Compute Mode\s+: (\S+)")
TIMESLICE = re.compile(r"\|\s+\d+\s+Timeslice\s+(\S+)\s+\|")


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart with the time-slicing and MPS gates on."""
    installed = install(e2e_cluster, tmp_path_factory.mktemp("driver-images"), VALUES)
    yield installed
    uninstall(installed)


def _uuid(driver: Driver, device: str) -> str:
    return str(driver.devices(driver.nodes[0])[device]["attributes"]["uuid"]["string"])


def test_gpu_test5_time_slicing_and_mps_in_one_pod(driver: Driver) -> None:
    cluster, manifest = driver.cluster, demo("quickstart_v1_gpu-test5.yaml")
    node = driver.nodes[0]
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        (name,) = running_pods(cluster, "gpu-test5", 1)
        for ctr in ("ts-ctr0", "ts-ctr1"):
            log = logs_of(cluster, name, "gpu-test5", ctr, "Timeslice")
            assert TIMESLICE.findall(log) == ["Long"], log
            assert COMPUTE_MODE.findall(log) == ["Default"], log
            assert "CUDA_MPS" not in log
        for ctr in ("mps-ctr0", "mps-ctr1"):
            log = logs_of(cluster, name, "gpu-test5", ctr, "MPS active thread percentage")
            assert COMPUTE_MODE.findall(log) == ["Exclusive_Process"], log
            assert "MPS pipe directory: /tmp/nvidia-mps" in log
            assert "MPS active thread percentage: 50.0" in log
        (claim,) = pod_claims(cluster, name, "gpu-test5").values()
        ts_gpu, mps_gpu = (_uuid(driver, d) for d in allocated_devices(claim))
        state = fake_gpu_state(driver, node)
        assert state[ts_gpu]["time_slice"] == 3  # Long
        assert state[mps_gpu]["compute_mode"] == 3  # EXCLUSIVE_PROCESS
    state = fake_gpu_state(driver, node)
    assert (state[ts_gpu]["time_slice"], state[mps_gpu]["compute_mode"]) == (0, 0)


def test_gpu_test_mps_two_containers_share_one_daemon(driver: Driver) -> None:
    cluster, manifest = driver.cluster, demo("quickstart_v1_gpu-test-mps.yaml")
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        running_pods(cluster, "gpu-test-mps", 1)
        uuids = set()
        for ctr in ("mps-ctr0", "mps-ctr1"):
            log = logs_of(cluster, "test-pod", "gpu-test-mps", ctr, "MPS active thread")
            assert "MPS active thread percentage: 50.0" in log
            assert COMPUTE_MODE.findall(log) == ["Exclusive_Process"]
            uuids.update(re.findall(r"UUID: (GPU-[0-9a-f-]+)", log))
        assert len(uuids) == 1, "both containers see the one shared GPU"
        daemons = list((driver.plugin_dir(driver.nodes[0]) / "mps").iterdir())
        assert len(daemons) == 1, "one MPS control daemon for the claim"
    assert not any((driver.plugin_dir(driver.nodes[0]) / "mps").iterdir())
