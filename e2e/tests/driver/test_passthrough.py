"""Passthrough GPUs on the harness: NVIDIA's two vfio demo specs on fake GPUs, with the chart
installed once for the module with ``PassthroughSupport`` and ``DeviceMetadata`` on.

While a pod holds ``gpu-vfio-M``, the fake host tree shows its GPU on ``vfio-pci``, the pod
has the group's ``/dev/vfio`` node (and the KEP-5304 metadata file naming the GPU's PCI
address), and the sibling ``gpu-N`` is gone from the slice; after the pod, the GPU is back on
``nvidia`` and ``gpu-N`` is published again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from demo_specs import demo
from dra_e2e.handle import ClusterHandle
from driver_support import (
    Driver,
    allocated_devices,
    applied,
    kernel_driver,
    own_install,
    pod_claims,
    wait_running,
)

# driver_diagnostics: conftest.py.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

NAMESPACE = "gpu-test-vfio"
GATES = {"featureGates.PassthroughSupport": "true", "featureGates.DeviceMetadata": "true"}


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart on fake GPUs with passthrough on (one install for the module)."""
    workdir = tmp_path_factory.mktemp("vfio-images")
    with own_install(e2e_cluster, workdir, GATES, needs="PassthroughSupport on") as installed:
        yield installed


def _sibling(devices: dict[str, dict[str, Any]], name: str) -> str:
    bus = devices[name]["attributes"]["resource.kubernetes.io/pciBusID"]["string"]
    (twin,) = [
        n
        for n, d in devices.items()
        if n != name
        and d["attributes"]["type"]["string"] == "gpu"
        and d["attributes"]["resource.kubernetes.io/pciBusID"]["string"] == bus
    ]
    return twin


def _run_spec(
    driver: Driver, manifest: str, pod_name: str, pod_namespace: str, *, api_device: bool
) -> None:
    cluster, node = driver.cluster, driver.nodes[0]
    before = driver.devices(node)
    vfio_names = sorted(n for n, d in before.items() if d["attributes"]["type"]["string"] == "vfio")
    gpu_names = sorted(n for n, d in before.items() if d["attributes"]["type"]["string"] == "gpu")
    assert vfio_names, "PassthroughSupport publishes gpu-vfio-M devices"
    assert len(vfio_names) == len(gpu_names), "every GPU without MIG has a vfio twin"
    # Both specs create only NAMESPACE; a pod elsewhere lives in a namespace the caller made.
    with applied(cluster, manifest, namespaces=(NAMESPACE,)):
        wait_running(cluster, pod_name, pod_namespace)
        (claim,) = pod_claims(cluster, pod_name, pod_namespace).values()
        (device,) = allocated_devices(claim)
        assert re.fullmatch(r"gpu-vfio-\d+", device)
        attrs = before[device]["attributes"]
        bus_id = attrs["resource.kubernetes.io/pciBusID"]["string"]
        twin = _sibling(before, device)
        cluster.wait_until(
            f"{twin} to leave the slice while {device} is prepared",
            lambda: twin not in driver.devices(node),
            timeout=60,
            interval=1,
        )
        assert device in driver.devices(node)
        assert kernel_driver(driver, node, bus_id) == "vfio-pci"
        listing = cluster.kubectl(
            "exec", pod_name, "-n", pod_namespace, "--", "bash", "-c", "ls /dev/vfio"
        ).split()
        group = str(int(bus_id.split(":")[1], 16))  # the fake host's group numbering
        assert group in listing, listing
        # iommu.enableAPIDevice adds /dev/vfio/vfio; NVIDIA's default is false.
        assert ("vfio" in listing) is api_device, listing
        claim_name = claim["metadata"]["name"]
        metadata = json.loads(
            cluster.kubectl(
                "exec",
                pod_name,
                "-n",
                pod_namespace,
                "--",
                "bash",
                "-c",
                f"cat /var/run/dra-device-attributes/{claim_name}/gpu/gpu.nvidia.com-metadata.json",
            )
        )
        assert metadata["kind"] == "DeviceMetadata"
        (published,) = metadata["requests"][0]["devices"]
        assert published["name"] == device
        meta_attrs = published["attributes"]
        assert meta_attrs["resource.kubernetes.io/pciBusID"] == {"string": bus_id}
        assert meta_attrs["iommuGroup"] == {"int": int(group)}
        assert meta_attrs["vfioDeviceNode"] == {"string": f"/dev/vfio/{group}"}
    cluster.wait_until(
        f"{twin} back in the slice after the pod",
        lambda: twin in driver.devices(node),
        timeout=120,
        interval=2,
    )
    assert kernel_driver(driver, node, bus_id) == "nvidia"


def test_vfiopci_spec_passes_a_gpu_through(driver: Driver) -> None:
    manifest = demo("quickstart_v1_gpu-test-vfiopci.yaml")
    _run_spec(driver, manifest, "pod1", NAMESPACE, api_device=False)


def test_vfio_config_spec_with_legacy_backend_and_api_device(driver: Driver) -> None:
    manifest = demo("quickstart_v1_gpu-test-vfio-config.yaml")
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    (pod,) = [d for d in docs if d["kind"] == "Pod"]
    (template,) = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    # Upstream staleness: the spec's Pod lives in gpu-test-vfiopci, which the spec neither
    # creates nor gives the template. The file is applied as it is, after what it assumes.
    pod_namespace = pod["metadata"]["namespace"]
    assert pod_namespace == "gpu-test-vfiopci"
    assert template["metadata"]["namespace"] == NAMESPACE
    template["metadata"]["namespace"] = pod_namespace
    prerequisites = yaml.safe_dump_all(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": pod_namespace}}, template]
    )
    with applied(driver.cluster, prerequisites, namespaces=(pod_namespace,)):
        _run_spec(driver, manifest, pod["metadata"]["name"], pod_namespace, api_device=True)
