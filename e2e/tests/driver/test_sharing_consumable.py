"""Consumable GPU shares on the harness cluster with the chart (``consumableShares=4``, the
TimeSlicingSettings gate on): NVIDIA's three consumable-shares demos run unchanged, and the
seed article's "4 pods share one GPU" (``maxSharableGPU: 4``) in its native form: four
time-sliced claims on one GPU run, a fifth waits, because the scheduler counts the shares."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from demo_specs import demo, namespaces_of
from dra_e2e.handle import ClusterHandle
from driver_support import (
    Driver,
    allocated_devices,
    applied,
    events_for,
    install,
    pod,
    pod_claims,
    uninstall,
)
from sharing_support import fake_gpu_state, logs_of, running_pods

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

VALUES = {"consumableShares": "4", "featureGates.TimeSlicingSettings": "true"}
UUID = re.compile(r"UUID: (GPU-[0-9a-f-]+)")
REPO = Path(__file__).resolve().parents[3]
#: The seed's time-sliced NvidiaGPUConfig (``interval: "5ms"``, ``maxSharableGPU: 4``).
SEED_TIME_SLICING = REPO / "packages/kubectl-dra/tests/fixtures/seed000/time-slicing.yaml"
KUBECTL_DRA = Path(sys.executable).with_name("kubectl-dra")


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart publishing every GPU with 4 shares."""
    installed = install(e2e_cluster, tmp_path_factory.mktemp("driver-images"), VALUES)
    yield installed
    uninstall(installed)


def test_gpus_are_published_shareable(driver: Driver) -> None:
    for device in driver.devices(driver.nodes[0]).values():
        assert device["allowMultipleAllocations"] is True
        assert device["capacity"]["shares"]["value"] == "4"


def _devices_of(cluster: ClusterHandle, pods: list[str], namespace: str) -> list[str]:
    out = []
    for name in pods:
        for claim in pod_claims(cluster, name, namespace).values():
            out += allocated_devices(claim)
    return out


@pytest.mark.parametrize(
    ("spec", "namespace", "replicas", "words"),
    [
        ("consumable-shares_integer-sharing.yaml", "gpu-share-integer", 4, "1 share claim"),
        ("consumable-shares_memory-sharing.yaml", "gpu-share-memory", 2, "4Gi memory claim"),
        ("consumable-shares_unlimited-sharing.yaml", "gpu-share-unlimited", 2, "unlimited"),
    ],
)
def test_consumable_shares_demo(
    driver: Driver, spec: str, namespace: str, replicas: int, words: str
) -> None:
    cluster, manifest = driver.cluster, demo(spec)
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        pods = running_pods(cluster, namespace, replicas)
        for name in pods:
            log = logs_of(cluster, name, namespace, "ctr", words)
            assert len(UUID.findall(log)) == 1, log
        per_device = Counter(_devices_of(cluster, pods, namespace))
        assert sum(per_device.values()) == replicas
        assert max(per_device.values()) <= 4, "the scheduler enforces the share count"
        if "memory" in spec:
            for name in pods:
                for claim in pod_claims(cluster, name, namespace).values():
                    (result,) = claim["status"]["allocation"]["devices"]["results"]
                    assert result["consumedCapacity"]["memory"] == "4Gi"


SEED_TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "shared-gpu"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.nvidia.com",
                            "selectors": [{"cel": {"expression": "UUID_EXPRESSION"}}],
                        },
                    }
                ],
                "config": [
                    {
                        "requests": ["gpu"],
                        "opaque": {
                            "driver": "gpu.nvidia.com",
                            "parameters": {
                                "apiVersion": "resource.nvidia.com/v1beta1",
                                "kind": "GpuConfig",
                                "sharing": {
                                    "strategy": "TimeSlicing",
                                    "timeSlicingConfig": {"interval": "Short"},
                                },
                            },
                        },
                    }
                ],
            }
        }
    },
}


def _inference_pod(name: str, template: str = "shared-gpu") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
            "containers": [
                {
                    "name": "inference",
                    "image": "ubuntu:22.04",
                    "command": ["bash", "-c"],
                    "args": ["nvidia-smi -L; nvidia-smi compute-policy -l; sleep 3600"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
        },
    }


def _fifth_unschedulable(cluster: ClusterHandle, name: str, namespace: str) -> None:
    cluster.wait_until(
        f"{name} to be unschedulable",
        lambda: any("FailedScheduling" in e for e in events_for(cluster, "Pod", name, namespace)),
        timeout=90,
    )
    assert pod(cluster, name, namespace)["status"]["phase"] == "Pending"


def test_seed_four_inference_pods_share_one_gpu(driver: Driver, e2e_namespace: str) -> None:
    """The seed's ``strategy: TimeSlicing`` with ``maxSharableGPU: 4``: the claims select one
    GPU; four run on it, time-sliced, and the fifth stays Pending."""
    cluster, node = driver.cluster, driver.nodes[0]
    target = driver.devices(node)["gpu-0"]["attributes"]["uuid"]["string"]
    template = json.loads(
        json.dumps(SEED_TEMPLATE).replace(
            "UUID_EXPRESSION", f"device.attributes['gpu.nvidia.com'].uuid == '{target}'"
        )
    )
    cluster.apply(json.dumps(template), namespace=e2e_namespace)
    names = [f"inference-{i}" for i in range(5)]
    for name in names[:4]:
        cluster.apply(json.dumps(_inference_pod(name)), namespace=e2e_namespace)
    running_pods(cluster, e2e_namespace, 4)
    for name in names[:4]:
        log = logs_of(cluster, name, e2e_namespace, "inference", "Timeslice")
        assert UUID.findall(log) == [target], log
        assert re.search(r"Timeslice\s+Short", log), log
    assert fake_gpu_state(driver, node)[target]["time_slice"] == 1  # Short
    cluster.apply(json.dumps(_inference_pod(names[4])), namespace=e2e_namespace)
    _fifth_unschedulable(cluster, names[4], e2e_namespace)
    # The GPU keeps its time-slice until the last of its claims is unprepared.
    cluster.kubectl("delete", "pod", names[0], "-n", e2e_namespace, "--wait=true")
    running_pods(cluster, e2e_namespace, 4)  # the fifth takes the freed share
    assert fake_gpu_state(driver, node)[target]["time_slice"] == 1
    cluster.kubectl(
        "delete", "pods", "--all", "-n", e2e_namespace, "--wait=true", "--timeout=120s",
        timeout=150,
    )  # fmt: skip
    cluster.wait_until(
        "the time-slice reset by the last claim",
        lambda: fake_gpu_state(driver, node)[target]["time_slice"] == 0,
        timeout=90,
    )


def test_migrated_seed_time_slicing_runs_four_pods_on_one_gpu(
    driver: Driver, e2e_namespace: str
) -> None:
    """``kubectl dra migrate`` of the seed's time-sliced NvidiaGPUConfig, applied as printed:
    its DeviceClass time-slices (``5ms`` -> Medium) and the chart value its note names
    (``consumableShares=4``, this module's install) lets exactly four claims share a GPU."""
    migrated = subprocess.run(
        [str(KUBECTL_DRA), "migrate", "-f", str(SEED_TIME_SLICING)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    shares = re.search(r"chart value consumableShares=(\d+)", migrated.stderr)
    assert shares is not None, migrated.stderr
    assert shares.group(1) == VALUES["consumableShares"] == "4", "install what migrate says"
    (device_class,) = [d for d in yaml.safe_load_all(migrated.stdout) if d]
    assert device_class["kind"] == "DeviceClass", migrated.stdout
    class_name = device_class["metadata"]["name"]
    cluster, node = driver.cluster, driver.nodes[0]
    target = driver.devices(node)["gpu-1"]["attributes"]["uuid"]["string"]
    # The seed has no claim for this config; the note says how claims select it. The UUID
    # selector pins them to one GPU so that the share count, not the fleet, decides.
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "migrated-shared-gpu"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": class_name,
                                "selectors": [
                                    {
                                        "cel": {
                                            "expression": "device.attributes['gpu.nvidia.com']"
                                            f".uuid == '{target}'"
                                        }
                                    }
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }
    names = [f"migrated-{i}" for i in range(5)]
    try:
        cluster.apply(migrated.stdout, namespace=e2e_namespace)  # as a user: kubectl apply -n
        cluster.apply(json.dumps(template), namespace=e2e_namespace)
        for name in names[:4]:
            manifest = _inference_pod(name, "migrated-shared-gpu")
            cluster.apply(json.dumps(manifest), namespace=e2e_namespace)
        running_pods(cluster, e2e_namespace, 4)
        for name in names[:4]:
            log = logs_of(cluster, name, e2e_namespace, "inference", "Timeslice")
            assert UUID.findall(log) == [target], log
            assert re.search(r"Timeslice\s+Medium", log), log
        assert fake_gpu_state(driver, node)[target]["time_slice"] == 2  # Medium
        cluster.apply(
            json.dumps(_inference_pod(names[4], "migrated-shared-gpu")), namespace=e2e_namespace
        )
        _fifth_unschedulable(cluster, names[4], e2e_namespace)
    finally:
        cluster.kubectl(
            "delete", "pods", "--all", "-n", e2e_namespace, "--wait=true", "--timeout=120s",
            timeout=150,
        )  # fmt: skip
        cluster.kubectl("delete", "deviceclass", class_name, "--ignore-not-found")
    cluster.wait_until(
        "the time-slice reset by the last claim",
        lambda: fake_gpu_state(driver, node)[target]["time_slice"] == 0,
        timeout=90,
    )
