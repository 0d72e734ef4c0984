"""Device-plugin workloads on DRA, unmodified: ``nvidia.com/gpu: N`` served through the chart's
DeviceClass ``gpu.nvidia.com`` (``extendedResourceName``; KEP 5004, GA in Kubernetes 1.37).

The scheduler turns each pod's request into a ResourceClaim of its own; the fake
``nvidia-smi -L`` in the pod lists exactly the GPUs of that claim. A pod asking for more GPUs
than the node has stays Pending and ``kubectl dra explain`` (live) says why.

NVIDIA's ``extended-resources_mig-1g-12gb.yaml`` runs too: this module's install adds the node
its comment describes, 2x GH200 96GB with 7x 1g.12gb each (``2xGH200-96GB:mig=7x1g.12gb``, MIG
devices created before the plugin starts, as mig-parted leaves them), next to the usual fleet.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from demo_specs import demo
from dra_e2e.handle import ClusterHandle
from driver_support import (
    FAKE_GPUS,
    Driver,
    allocated_devices,
    applied,
    events_for,
    forget_fake_fleet,
    install,
    pod,
    smi_lines,
    uninstall,
    wait_gone,
    wait_running,
)

# driver_diagnostics: conftest.py; driver: below (this module's own fleet).
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

KUBECTL_DRA = Path(sys.executable).with_name("kubectl-dra")
#: The harness's stand-in for NVIDIA's CUDA images (images/build_image.py "workload").
STAND_IN_IMAGE = "ubuntu:22.04"
LIST_AND_WAIT = "nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"
#: The node of extended-resources_mig-1g-12gb.yaml's comment, after the usual fleet (whose GPUs
#: keep their indices and so their UUIDs).
GH200_NODE = "2xGH200-96GB:mig=7x1g.12gb"
MIG_SPEC = "extended-resources_mig-1g-12gb.yaml"
MIG_LINE = re.compile(r"^MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[0-9a-f-]+)\)$")


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart installed on the usual fake fleet plus the spec's two GH200s; the node's fake
    state is reset before and after, so other modules' installs start from their own fleet."""
    forget_fake_fleet(e2e_cluster)
    fleet = "{" + ",".join((*FAKE_GPUS, GH200_NODE)) + "}"
    installed = install(
        e2e_cluster, tmp_path_factory.mktemp("driver-images"), {"devices.fakeGpus": fleet}
    )
    yield installed
    uninstall(installed)
    if installed.installed_here:
        wait_gone(installed.cluster, "kubelet plugin pods", lambda: not installed.plugin_pods())
        forget_fake_fleet(e2e_cluster)


def _mig_lines(text: str) -> list[tuple[str, int, str]]:
    """``(profile, index, UUID)`` of each ``nvidia-smi -L`` MIG line."""
    out = []
    for line in text.splitlines():
        m = MIG_LINE.match(line.strip())
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def _mig_1g_12gb(driver: Driver) -> list[dict[str, Any]]:
    """The node's published 1g.12gb devices; skips on an adopted release without them."""
    devices = [
        d
        for d in driver.devices(driver.nodes[0]).values()
        if d["attributes"]["type"]["string"] == "mig"
        and d["attributes"].get("profile", {}).get("string") == "1g.12gb"
    ]
    if not devices and not driver.installed_here:
        pytest.skip("the adopted release ($DRA_E2E_RELEASE) publishes no MIG 1g.12gb device")
    return devices


def _device_plugin_pod(name: str, namespace: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "ctr",
                    "image": STAND_IN_IMAGE,
                    "command": ["bash", "-c", LIST_AND_WAIT],
                    "resources": {"limits": {"nvidia.com/gpu": gpus}},
                }
            ],
        },
    }


def _with_stand_in_image(spec: str) -> tuple[str, list[dict[str, Any]]]:
    """NVIDIA's demo spec with only the workload image (and its command) replaced."""
    docs = [d for d in yaml.safe_load_all(demo(spec)) if d]
    for doc in docs:
        if doc["kind"] == "Pod":
            for ctr in doc["spec"]["containers"]:
                ctr["image"] = STAND_IN_IMAGE
                ctr["command"] = ["bash", "-c", LIST_AND_WAIT]
    return yaml.safe_dump_all(docs), docs


def _scheduler_claim(cluster: ClusterHandle, name: str, namespace: str) -> dict[str, Any]:
    status = cluster.wait_until(
        f"extendedResourceClaimStatus of {namespace}/{name}",
        lambda: pod(cluster, name, namespace)["status"].get("extendedResourceClaimStatus"),
        timeout=60,
    )
    claim = dict(
        cluster.kubectl_json("get", "resourceclaim", status["resourceClaimName"], "-n", namespace)
    )
    assert claim["metadata"]["annotations"]["resource.kubernetes.io/extended-resource-claim"] == (
        "true"
    )
    return claim


def _listed_uuids(cluster: ClusterHandle, name: str, namespace: str) -> list[str]:
    logs = cluster.wait_until(
        f"nvidia-smi -L in {namespace}/{name}",
        lambda: cluster.kubectl("logs", name, "-n", namespace),
        timeout=60,
    )
    return [uuid_ for _, _, uuid_ in smi_lines(logs)]


def _uuids(driver: Driver, claim: dict[str, Any]) -> set[str]:
    node = claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"
    ][0]
    devices = driver.devices(node)
    return {str(devices[d]["attributes"]["uuid"]["string"]) for d in allocated_devices(claim)}


@pytest.mark.parametrize("gpus", [1, 2])
def test_device_plugin_pod_runs_unchanged_on_exactly_its_gpus(
    driver: Driver, e2e_namespace: str, gpus: int
) -> None:
    cluster, name = driver.cluster, f"limits-{gpus}"
    manifest = yaml.safe_dump(_device_plugin_pod(name, e2e_namespace, gpus))
    with applied(cluster, manifest):
        wait_running(cluster, name, e2e_namespace)
        claim = _scheduler_claim(cluster, name, e2e_namespace)
        (request,) = claim["spec"]["devices"]["requests"]
        assert request["name"] == "container-0-request-0"
        assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
        assert request["exactly"]["count"] == gpus
        listed = _listed_uuids(cluster, name, e2e_namespace)
        assert len(listed) == gpus
        assert set(listed) == _uuids(driver, claim)


def test_nvidia_gpu_full_spec_lists_its_one_gpu(driver: Driver) -> None:
    cluster = driver.cluster
    manifest, docs = _with_stand_in_image("extended-resources_gpu-full.yaml")
    (pod_doc,) = [d for d in docs if d["kind"] == "Pod"]
    name, namespace = pod_doc["metadata"]["name"], pod_doc["metadata"]["namespace"]
    with applied(cluster, manifest, namespaces=(namespace,)):
        wait_running(cluster, name, namespace)
        claim = _scheduler_claim(cluster, name, namespace)
        listed = _listed_uuids(cluster, name, namespace)
        assert len(listed) == 1
        assert set(listed) == _uuids(driver, claim)
        status = pod(cluster, name, namespace)["status"]["extendedResourceClaimStatus"]
        assert status["requestMappings"] == [
            {
                "containerName": "cuda-container",
                "requestName": "container-0-request-0",
                "resourceName": "nvidia.com/gpu",
            }
        ]


def test_more_gpus_than_the_node_has_stays_pending_and_explain_says_why(
    driver: Driver, e2e_namespace: str
) -> None:
    cluster = driver.cluster
    node = driver.nodes[0]
    gpus = [d for d in driver.devices(node).values() if d["attributes"]["type"]["string"] == "gpu"]
    want = len(gpus) + 1
    name = "too-many"
    with applied(cluster, yaml.safe_dump(_device_plugin_pod(name, e2e_namespace, want))):
        cluster.wait_until(
            f"FailedScheduling of {e2e_namespace}/{name}",
            lambda: any(
                e.startswith("FailedScheduling")
                for e in events_for(cluster, "Pod", name, e2e_namespace)
            ),
            timeout=120,
        )
        assert pod(cluster, name, e2e_namespace)["status"]["phase"] == "Pending"
        proc = subprocess.run(
            [str(KUBECTL_DRA), "explain", f"pod/{name}", "-n", e2e_namespace],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        )
        assert proc.returncode == 1, proc.stderr  # nothing fits: explain says no
        lines = proc.stdout.splitlines()
        assert lines[0] == f"Pod {e2e_namespace}/{name}: pending; extended resources:"
        assert f"  container ctr: nvidia.com/gpu: {want} -> DeviceClass gpu.nvidia.com" in lines[1]
        assert f"ResourceClaim {e2e_namespace}/{name}-extended-resources: pending" in lines
        assert "  fits on no node" in lines
        assert (
            f"    - request container-0-request-0: needs {want} device(s) of class "
            f"gpu.nvidia.com, {len(gpus)} usable"
        ) in lines, proc.stdout


def test_nvidia_mig_1g_12gb_spec_runs_on_one_mig_device(driver: Driver) -> None:
    cluster = driver.cluster
    assert len(_mig_1g_12gb(driver)) == 14
    docs = [d for d in yaml.safe_load_all(demo(MIG_SPEC)) if d]
    for doc in docs:
        if doc["kind"] == "Pod":
            for ctr in doc["spec"]["containers"]:
                ctr["image"] = STAND_IN_IMAGE  # the command stays NVIDIA's
    (pod_doc,) = [d for d in docs if d["kind"] == "Pod"]
    name, namespace = pod_doc["metadata"]["name"], pod_doc["metadata"]["namespace"]
    with applied(cluster, yaml.safe_dump_all(docs), namespaces=(namespace,)):
        wait_running(cluster, name, namespace)
        claim = _scheduler_claim(cluster, name, namespace)
        (request,) = claim["spec"]["devices"]["requests"]
        assert request["exactly"]["deviceClassName"] == "mig-1g-12gb.gpu.nvidia.com"
        assert request["exactly"]["count"] == 1
        status = pod(cluster, name, namespace)["status"]["extendedResourceClaimStatus"]
        assert status["requestMappings"] == [
            {
                "containerName": "cuda-container",
                "requestName": "container-0-request-0",
                "resourceName": "nvidia.com/mig-1g.12gb",
            }
        ]
        listing = cluster.kubectl("exec", name, "-n", namespace, "--", "nvidia-smi", "-L")
        gpus = smi_lines(listing)
        assert [(i, product) for i, product, _ in gpus] == [(0, "NVIDIA GH200 96GB HBM3")]
        migs = _mig_lines(listing)
        assert [(profile, index) for profile, index, _ in migs] == [("1g.12gb", 0)], listing
        assert {migs[0][2]} == _uuids(driver, claim)


def test_more_mig_1g_12gb_than_exist_stays_pending_and_explain_says_why(
    driver: Driver, e2e_namespace: str
) -> None:
    cluster = driver.cluster
    have = len(_mig_1g_12gb(driver))
    want = have + 1
    docs = [d for d in yaml.safe_load_all(demo(MIG_SPEC)) if d]
    (device_class,) = [d for d in docs if d["kind"] == "DeviceClass"]
    name = "too-many-mig"
    too_many = _device_plugin_pod(name, e2e_namespace, want)
    limits = too_many["spec"]["containers"][0]["resources"]["limits"]
    limits.clear()
    limits["nvidia.com/mig-1g.12gb"] = want
    with applied(cluster, yaml.safe_dump_all([device_class, too_many])):
        cluster.wait_until(
            f"FailedScheduling of {e2e_namespace}/{name}",
            lambda: any(
                e.startswith("FailedScheduling")
                for e in events_for(cluster, "Pod", name, e2e_namespace)
            ),
            timeout=120,
        )
        assert pod(cluster, name, e2e_namespace)["status"]["phase"] == "Pending"
        proc = subprocess.run(
            [str(KUBECTL_DRA), "explain", f"pod/{name}", "-n", e2e_namespace],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        )
        assert proc.returncode == 1, proc.stderr  # nothing fits: explain says no
        lines = proc.stdout.splitlines()
        assert lines[0] == f"Pod {e2e_namespace}/{name}: pending; extended resources:"
        assert (
            f"  container ctr: nvidia.com/mig-1g.12gb: {want} -> DeviceClass "
            "mig-1g-12gb.gpu.nvidia.com"
        ) in lines[1], proc.stdout
        assert "  fits on no node" in lines, proc.stdout
        assert (
            f"    - request container-0-request-0: needs {want} device(s) of class "
            f"mig-1g-12gb.gpu.nvidia.com, {have} usable"
        ) in lines, proc.stdout
