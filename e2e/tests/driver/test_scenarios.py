"""The driver end to end: the chart installed on a real cluster with fake GPUs, the seed article's
walkthrough, NVIDIA's demo manifests, CEL selectors, and the claim lifecycle.

Runs against the session cluster (``e2e_cluster``): the local one this repository starts, or the
one in ``$KUBECONFIG`` (kind/up.sh installs the chart there first and sets DRA_E2E_RELEASE).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from typing import Any

import pytest
from demo_specs import demo, namespaces_of
from dra_api_types import Quantity
from dra_e2e import seed
from dra_e2e.errors import KubectlError
from dra_e2e.versions import resolve_kube_version
from dra_nvlib.fleet import load_fleet_spec
from driver_support import (
    CHART,
    DRIVER,
    FAKE_GPUS,
    Driver,
    allocated_devices,
    applied,
    assert_unprepared,
    cdi_specs_of,
    checkpoint_claims,
    container_state,
    events_for,
    exists,
    gpus_in_log,
    helm_path,
    pod,
    pod_claims,
    run_helm,
    smi_lines,
    wait_for_event,
    wait_gone,
    wait_running,
)

# driver and driver_diagnostics: conftest.py.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

GPU_CLASSES = {"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"}


def _node_of(driver: Driver) -> str:
    return driver.nodes[0]


def _uuid_of(driver: Driver, node: str, device: str) -> str:
    return str(driver.devices(node)[device]["attributes"]["uuid"]["string"])


def _memory(device: dict[str, Any]) -> str:
    return str(device["capacity"]["memory"]["value"])


def test_install_prints_the_next_commands(driver: Driver) -> None:
    if not driver.installed_here:
        pytest.skip("the release was installed by kind/up.sh")
    assert "kubectl get resourceslices" in driver.install_output
    assert "kubectl get deviceclass" in driver.install_output
    assert "GPU backend: fake" in driver.install_output
    # The NOTES print the seed's objects from the chart's one copy, comments stripped.
    for line in ("name: single-gpu", "name: gpu-test-pod", "resourceClaimTemplateName: single-gpu"):
        assert line in driver.install_output
    manifest = driver.install_output.split("kubectl apply -f -", 1)[1].split("YAML", 1)[0]
    assert "#" not in manifest


def test_plugin_runs_unprivileged(driver: Driver) -> None:
    for plugin in driver.plugin_pods():
        (container,) = plugin["spec"]["containers"]
        assert container["securityContext"]["privileged"] is False
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert plugin["status"]["phase"] == "Running"


def test_resourceslices_show_the_gpus_with_their_attributes(driver: Driver) -> None:
    listing = driver.cluster.kubectl("get", "resourceslices")
    header = listing.splitlines()[0].split()
    assert header == ["NAME", "NODE", "DRIVER", "POOL", "AGE"]
    for node in driver.nodes:
        slices = driver.slices(node)
        assert len(slices) == 1, "one gpu.nvidia.com slice per node"
        rows = [line.split() for line in listing.splitlines()[1:]]
        assert [node, DRIVER, node] in [r[1:4] for r in rows]
        (slc,) = slices
        assert slc["spec"]["pool"]["name"] == node
        assert slc["metadata"]["ownerReferences"][0]["kind"] == "Node"
        devices = slc["spec"]["devices"]
        # The counts follow the fleet the release was installed with (kind/up.sh: FAKE_GPUS).
        fleet = load_fleet_spec(",".join(FAKE_GPUS))
        assert len(devices) == fleet.gpu_count
        for device in devices:
            assert re.fullmatch(r"gpu-\d+", device["name"])
            attrs = device["attributes"]
            assert attrs["type"] == {"string": "gpu"}
            assert attrs["brand"] == {"string": "Nvidia"}
            assert attrs["uuid"]["string"].startswith("GPU-")
            for version_attr in ("cudaComputeCapability", "driverVersion"):
                assert "version" in attrs[version_attr]
            assert "string" in attrs["productName"]
            assert "string" in attrs["architecture"]
            assert "memory" in device["capacity"]
        products = {d["attributes"]["productName"]["string"] for d in devices}
        assert products == {e.model.product_name for e in fleet.entries}


def test_deviceclasses_are_listed(driver: Driver) -> None:
    listing = driver.cluster.kubectl("get", "deviceclass")
    names = {line.split()[0] for line in listing.splitlines()[1:]}
    assert names >= GPU_CLASSES
    gpu = driver.cluster.kubectl_json("get", "deviceclass", "gpu.nvidia.com")
    assert gpu["spec"]["selectors"] == [
        {
            "cel": {
                "expression": "device.driver == 'gpu.nvidia.com' && "
                "device.attributes['gpu.nvidia.com'].type == 'gpu'"
            }
        }
    ]


def test_seed_walkthrough(driver: Driver) -> None:
    """Section 3 of the seed article, verbatim: template single-gpu, pod gpu-test-pod."""
    cluster = driver.cluster
    node = _node_of(driver)
    with applied(cluster, seed.manifests()):
        wait_running(cluster, "gpu-test-pod", "default")
        wide = cluster.kubectl("get", "pod", "gpu-test-pod", "-o", "wide")
        assert "Running" in wide
        assert node in wide
        listing = cluster.kubectl("get", "resourceclaim", "-n", "default")
        (row,) = [
            line.split() for line in listing.splitlines()[1:] if "gpu-test-pod-gpu-claim-" in line
        ]
        assert row[1] == "allocated,reserved"
        (claim,) = pod_claims(cluster, "gpu-test-pod", "default").values()
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == DRIVER
        assert result["pool"] == node
        assert result["request"] == "gpu"
        assert result["device"] in driver.devices(node)
        assert claim["status"]["reservedFor"][0]["name"] == "gpu-test-pod"
        describe = cluster.kubectl("describe", "resourceclaim", claim["metadata"]["name"])
        assert "allocated" in describe.lower() or "Reserved For" in describe
        logs = cluster.wait_until(
            "the pod's log",
            lambda: (
                (out := cluster.kubectl("logs", "gpu-test-pod")) and "successful" in out and out
            ),
            timeout=60,
        )
        (gpu_line,) = smi_lines(logs)
        assert gpu_line[0] == 0
        assert gpu_line[2] == _uuid_of(driver, node, result["device"])
        assert logs.rstrip().endswith("GPU allocation successful.")
        claim_name, claim_uid = claim["metadata"]["name"], claim["metadata"]["uid"]
    # Deleting the pod deletes the generated claim and unprepares it on the node.
    wait_gone(
        cluster,
        f"generated claim {claim_name} deleted",
        lambda: not exists(cluster, "resourceclaim", claim_name, "-n", "default"),
    )
    if driver.local:
        assert_unprepared(driver, node, claim_uid)


def test_demo_gpu_test1_two_pods_get_separate_gpus(driver: Driver) -> None:
    cluster, manifest = driver.cluster, demo("quickstart_v1_gpu-test1.yaml")
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        for name in ("pod1", "pod2"):
            wait_running(cluster, name, "gpu-test1")
        seen = [gpus_in_log(cluster, n, "gpu-test1", "ctr") for n in ("pod1", "pod2")]
        assert all(len(g) == 1 for g in seen), seen
        assert seen[0] != seen[1]


def test_demo_gpu_test2_containers_of_a_pod_share_one_gpu(driver: Driver) -> None:
    cluster, manifest = driver.cluster, demo("quickstart_v1_gpu-test2.yaml")
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        wait_running(cluster, "pod", "gpu-test2")
        seen = [gpus_in_log(cluster, "pod", "gpu-test2", c) for c in ("ctr0", "ctr1")]
        assert len(seen[0]) == 1
        assert seen[0] == seen[1]


def test_demo_gpu_test3_pods_share_one_claim(driver: Driver) -> None:
    cluster, manifest = driver.cluster, demo("quickstart_v1_gpu-test3.yaml")
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        for name in ("pod1", "pod2"):
            wait_running(cluster, name, "gpu-test3")
        seen = [gpus_in_log(cluster, n, "gpu-test3", "ctr") for n in ("pod1", "pod2")]
        assert len(seen[0]) == 1
        assert seen[0] == seen[1]
        claim = cluster.kubectl_json("get", "resourceclaim", "single-gpu", "-n", "gpu-test3")
        assert {r["name"] for r in claim["status"]["reservedFor"]} == {"pod1", "pod2"}


def test_demo_gpu_test6_time_slicing_is_refused_per_claim(driver: Driver) -> None:
    """gpu-test6 with its stale ``index`` selector replaced by the UUIDs of the A100s; with
    the TimeSlicingSettings gate off (the default install) its TimeSlicing config is refused
    at prepare with a clear per-claim error naming the gate, and the pods wait instead of
    starting without the sharing they asked for (test_sharing_* runs it with the gate on)."""
    cluster, node = driver.cluster, _node_of(driver)
    a100s = sorted(
        d["attributes"]["uuid"]["string"]
        for d in driver.devices(node).values()
        if "A100" in d["attributes"]["productName"]["string"]
    )
    assert len(a100s) == 4
    manifest = demo("quickstart_v1_gpu-test6.yaml")
    stale = re.search(
        r"\(device\.attributes\['gpu\.nvidia\.com'\]\.index == 0 \|\|.*?== 6\)", manifest, re.DOTALL
    )
    assert stale, "gpu-test6 still selects on index"
    uuids = ", ".join(f"'{u}'" for u in a100s)
    manifest = manifest.replace(
        stale.group(0), f"device.attributes['gpu.nvidia.com'].uuid in [{uuids}]"
    )
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):

        def refused() -> list[str]:
            pods = cluster.kubectl_json("get", "pods", "-n", "gpu-test6")["items"]
            if len(pods) != 4:
                return []
            messages = []
            for p in pods:
                events = events_for(cluster, "Pod", p["metadata"]["name"], "gpu-test6")
                hits = [e for e in events if "TimeSlicing is selected" in e]
                if not hits:
                    return []
                messages.append(hits[0])
            return messages

        messages = cluster.wait_until("prepare to refuse TimeSlicing", refused, timeout=180)
        assert all("TimeSlicingSettings feature gate is not enabled" in m for m in messages)
        for p in cluster.kubectl_json("get", "pods", "-n", "gpu-test6")["items"]:
            assert p["status"]["phase"] == "Pending"
            for claim in pod_claims(cluster, p["metadata"]["name"], "gpu-test6").values():
                (device,) = allocated_devices(claim)
                assert _uuid_of(driver, node, device) in a100s


@pytest.mark.parametrize(
    ("spec", "namespace", "pod_name", "strategy"),
    [
        ("quickstart_v1_gpu-test5.yaml", "gpu-test5", "pod0", "TimeSlicing"),
        ("quickstart_v1_gpu-test-mps.yaml", "gpu-test-mps", "test-pod", "MPS"),
    ],
)
def test_demo_sharing_configs_are_refused_per_claim(
    driver: Driver, spec: str, namespace: str, pod_name: str, strategy: str
) -> None:
    """With the sharing gates off (the default install), a claim asking for sharing is
    allocated but its prepare fails with an error naming the strategy and its gate, and the
    pod waits instead of running unshared (test_sharing_* runs them with the gates on)."""
    cluster, manifest = driver.cluster, demo(spec)
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        event = wait_for_event(cluster, pod_name, namespace, f"{strategy} is selected")
        assert "feature gate is not enabled" in event
        assert pod(cluster, pod_name, namespace)["status"]["phase"] == "Pending"


def test_demo_gpu_test4_mig_devices_are_not_offered_on_full_gpu_nodes(driver: Driver) -> None:
    """gpu-test4 asks for MIG devices; a node whose fake GPUs have MIG disabled publishes none,
    so the scheduler keeps its pods Pending and says why."""
    cluster, manifest = driver.cluster, demo("quickstart_v1_gpu-test4.yaml")
    assert not any(
        d["attributes"]["type"]["string"] == "mig"
        for d in driver.devices(_node_of(driver)).values()
    )
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        pods = cluster.wait_until(
            "gpu-test4's pods",
            lambda: cluster.kubectl_json("get", "pods", "-n", "gpu-test4")["items"],
            timeout=60,
        )
        first = pods[0]["metadata"]["name"]
        event = wait_for_event(cluster, first, "gpu-test4", "FailedScheduling")
        assert "cannot allocate all claims" in event
        assert pod(cluster, first, "gpu-test4")["status"]["phase"] == "Pending"


def test_demo_gpu_test7_two_claims_give_two_gpus(driver: Driver) -> None:
    cluster, manifest = driver.cluster, demo("quickstart_gpu-test7.yaml")
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        wait_running(cluster, "gpu-pod", "gpu-test7")
        seen = [gpus_in_log(cluster, "gpu-pod", "gpu-test7", c) for c in ("ctr0", "ctr1")]
        assert all(len(g) == 1 for g in seen), seen
        assert seen[0] != seen[1]


def test_one_container_with_two_claims_lists_both_gpus(driver: Driver, e2e_namespace: str) -> None:
    # Each claim's CDI spec carries only its own device: the fake nvidia-smi must still list
    # both GPUs, as the real one does.
    cluster, name = driver.cluster, "two-claims"
    exactly = {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount"}
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"{name}-{i}", "namespace": e2e_namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
        }
        for i in (0, 1)
    ]
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": e2e_namespace},
            "spec": {
                "containers": [
                    {
                        "name": "ctr",
                        "image": "ubuntu:22.04",
                        "command": ["bash", "-c"],
                        "args": ["nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"],
                        "resources": {"claims": [{"name": "gpu0"}, {"name": "gpu1"}]},
                    }
                ],
                "resourceClaims": [
                    {"name": f"gpu{i}", "resourceClaimTemplateName": f"{name}-{i}"} for i in (0, 1)
                ],
            },
        }
    )
    with applied(cluster, "\n---\n".join(json.dumps(d) for d in docs)):
        wait_running(cluster, name, e2e_namespace)
        claims = pod_claims(cluster, name, e2e_namespace).values()
        node = _node_of(driver)
        allocated = sorted(_uuid_of(driver, node, d) for c in claims for d in allocated_devices(c))
        assert len(set(allocated)) == 2
        seen = gpus_in_log(cluster, name, e2e_namespace, "ctr")
        assert sorted(seen) == allocated


def test_demo_gpu_test8_one_request_for_two_gpus(driver: Driver) -> None:
    cluster, manifest = driver.cluster, demo("quickstart_gpu-test8.yaml")
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        wait_running(cluster, "gpu-pod", "gpu-test8")
        (claim,) = pod_claims(cluster, "gpu-pod", "gpu-test8").values()
        devices = allocated_devices(claim)
        assert len(set(devices)) == 2


def _claim_pod(name: str, namespace: str, selector: str, *, mode: str = "ExactCount") -> str:
    exactly: dict[str, Any] = {
        "deviceClassName": "gpu.nvidia.com",
        "selectors": [{"cel": {"expression": selector}}],
        "allocationMode": mode,
    }
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }
    pod_obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "ctr",
                    "image": "ubuntu:22.04",
                    "command": ["bash", "-c"],
                    "args": ["nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
        },
    }
    return json.dumps(template) + "\n---\n" + json.dumps(pod_obj)


def test_memory_selector_lands_only_on_matching_gpus(driver: Driver, e2e_namespace: str) -> None:
    cluster, node = driver.cluster, _node_of(driver)
    selector = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
    big = {
        name
        for name, d in driver.devices(node).items()
        if "A100" in d["attributes"]["productName"]["string"]
    }
    with applied(cluster, _claim_pod("big-gpus", e2e_namespace, selector, mode="All")):
        wait_running(cluster, "big-gpus", e2e_namespace)
        (claim,) = pod_claims(cluster, "big-gpus", e2e_namespace).values()
        assert set(allocated_devices(claim)) == big
        for name in big:
            memory = driver.devices(node)[name]["capacity"]["memory"]["value"]
            assert Quantity.parse(memory) >= Quantity.parse("40Gi")
        seen = gpus_in_log(cluster, "big-gpus", e2e_namespace, "ctr")
        assert sorted(seen) == sorted(_uuid_of(driver, node, n) for n in big)


def test_unmatchable_selector_stays_pending_with_the_schedulers_reason(
    driver: Driver, e2e_namespace: str
) -> None:
    cluster = driver.cluster
    selector = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1Ti')) >= 0"
    with applied(cluster, _claim_pod("too-big", e2e_namespace, selector)):

        def reason() -> str:
            for event in events_for(cluster, "Pod", "too-big", e2e_namespace):
                if event.startswith("FailedScheduling:"):
                    return event
            return ""

        event = cluster.wait_until("FailedScheduling of too-big", reason, timeout=120)
        assert "cannot allocate all claims" in event
        assert pod(cluster, "too-big", e2e_namespace)["status"]["phase"] == "Pending"


def test_plugin_restart_republishes_slices_and_keeps_prepared_claims(
    driver: Driver, e2e_namespace: str
) -> None:
    cluster, node = driver.cluster, _node_of(driver)
    selector = "device.attributes['gpu.nvidia.com'].type == 'gpu'"
    with applied(cluster, _claim_pod("survivor", e2e_namespace, selector)):
        wait_running(cluster, "survivor", e2e_namespace)
        (claim,) = pod_claims(cluster, "survivor", e2e_namespace).values()
        before = {d: _uuid_of(driver, node, d) for d in driver.devices(node)}
        old_slices = {s["metadata"]["name"] for s in driver.slices(node)}
        (plugin,) = [p for p in driver.plugin_pods() if p["spec"].get("nodeName") == node]
        cluster.kubectl("delete", "pod", plugin["metadata"]["name"], "-n", driver.namespace)
        # A wiped node's slices must come back: delete them as the kubelet does at its start.
        for name in old_slices:
            cluster.kubectl("delete", "resourceslice", name, "--ignore-not-found")
        driver.wait_for_slices()
        cluster.wait_until(
            "a new plugin pod to run",
            lambda: any(
                p["status"].get("phase") == "Running"
                and p["metadata"]["name"] != plugin["metadata"]["name"]
                for p in driver.plugin_pods()
            ),
            timeout=180,
        )
        after = {d: _uuid_of(driver, node, d) for d in driver.devices(node)}
        assert after == before, "same devices, same UUIDs after the restart"
        assert pod(cluster, "survivor", e2e_namespace)["status"]["phase"] == "Running"
        if driver.local:
            checkpoint = (driver.plugin_dir(node) / "checkpoint.json").read_text()
            assert checkpoint.count(claim["metadata"]["uid"]) >= 1
        claim_uid = claim["metadata"]["uid"]
    if driver.local:
        assert_unprepared(driver, node, claim_uid)


def test_kubelet_crash_and_restart_republishes_slices_without_losing_or_doubling_preparation(
    driver: Driver, e2e_namespace: str
) -> None:
    cluster, node = driver.cluster, _node_of(driver)
    if cluster.local is None or not driver.local:
        pytest.skip("restarting a kubelet needs the local e2e cluster")
    selector = "device.attributes['gpu.nvidia.com'].type == 'gpu'"
    manifest = _claim_pod("holder", e2e_namespace, selector)
    second = _claim_pod("second", e2e_namespace, selector)
    with applied(cluster, manifest):
        wait_running(cluster, "holder", e2e_namespace)
        (claim,) = pod_claims(cluster, "holder", e2e_namespace).values()
        claim_uid = claim["metadata"]["uid"]
        (held,) = allocated_devices(claim)
        held_uuid = _uuid_of(driver, node, held)
        before = {d: _uuid_of(driver, node, d) for d in driver.devices(node)}
        old_slices = {s["metadata"]["name"] for s in driver.slices(node)}
        entry = checkpoint_claims(driver, node)[claim_uid]
        specs = cdi_specs_of(driver, node, claim_uid)
        assert entry["state"] == "PrepareCompleted"
        assert len(specs) == 1, specs
        container = container_state(cluster, "holder", e2e_namespace)

        # A crash: SIGKILL, no cleanup. Returns once the new kubelet reported the node Ready.
        cluster.restart_kubelet(node)

        # The new kubelet wipes every slice of its node at start; the plugin must publish
        # the same devices again (new objects: the wiped ones are gone).
        def republished() -> bool:
            slices = driver.slices(node)
            names = {s["metadata"]["name"] for s in slices}
            devices = {
                d["name"]: d["attributes"]["uuid"]["string"]
                for s in slices
                for d in s["spec"].get("devices", [])
            }
            return bool(names) and not names & old_slices and devices == before

        cluster.wait_until("slices wiped and republished", republished, timeout=180, interval=2)

        # The running pod was neither restarted nor re-prepared into a second state.
        assert container_state(cluster, "holder", e2e_namespace) == container
        assert pod(cluster, "holder", e2e_namespace)["status"]["phase"] == "Running"
        claims_after = checkpoint_claims(driver, node)
        assert claims_after[claim_uid] == entry, "checkpoint entry unchanged"
        holders = [
            uid
            for uid, c in claims_after.items()
            if any(d["deviceName"] == held for d in c["devices"])
        ]
        assert holders == [claim_uid], f"{held} prepared for {holders}"
        assert cdi_specs_of(driver, node, claim_uid) == specs, "CDI spec unchanged, no duplicate"

        # The restarted kubelet still prepares new claims, on a different GPU.
        with applied(cluster, second):
            wait_running(cluster, "second", e2e_namespace)
            (claim2,) = pod_claims(cluster, "second", e2e_namespace).values()
            claim2_uid = claim2["metadata"]["uid"]
            (other,) = allocated_devices(claim2)
            assert other != held
            assert gpus_in_log(cluster, "second", e2e_namespace, "ctr") == [before[other]]
            assert gpus_in_log(cluster, "holder", e2e_namespace, "ctr") == [held_uuid]
            assert set(checkpoint_claims(driver, node)) >= {claim_uid, claim2_uid}
        assert_unprepared(driver, node, claim2_uid)
        assert claim_uid in checkpoint_claims(driver, node), "the first claim stays prepared"
    assert_unprepared(driver, node, claim_uid)


def test_rendered_manifests_pass_server_side_validation(driver: Driver) -> None:
    rendered = run_helm(
        helm_path(),
        "template",
        driver.release,
        str(CHART),
        "--namespace",
        driver.namespace,
        "--include-crds",
        "--set",
        "gpuResourcesEnabledOverride=true",
        "--set",
        "resources.computeDomains.enabled=true",
        "--set",
        "devices.backend=fake",
    )
    out = driver.cluster.kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-f", "-", input_text=rendered
    )
    for kind in ("daemonset.apps", "deviceclass.resource.k8s.io", "validatingadmissionpolicy"):
        assert kind in out


@pytest.mark.skipif(
    resolve_kube_version(os.environ.get("DRA_E2E_KUBE_VERSION") or "").startswith("v1.34."),
    reason="kubectl v1.34 has no --as-user-extra (1.35+), needed to impersonate the node's plugin",
)
def test_admission_policy_denies_writing_another_nodes_slices(driver: Driver) -> None:
    cluster = driver.cluster
    sa = cluster.kubectl_json("get", "daemonset", "-n", driver.namespace, "-o", "json")
    (ds,) = sa["items"]
    account = ds["spec"]["template"]["spec"]["serviceAccountName"]
    node = _node_of(driver)
    slice_obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"intruder-{uuid.uuid4().hex[:6]}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "some-other-node",
            "pool": {"name": "some-other-node", "generation": 1, "resourceSliceCount": 1},
            "devices": [],
        },
    }
    user = f"system:serviceaccount:{driver.namespace}:{account}"
    with pytest.raises(
        KubectlError, match=r"may only write ResourceSlices with spec\.nodeName"
    ) as err:
        cluster.kubectl(
            "create",
            "--dry-run=server",
            "-f",
            "-",
            f"--as={user}",
            f"--as-user-extra=authentication.kubernetes.io/node-name={node}",
            input_text=json.dumps(slice_obj),
        )
    assert node in str(err.value)
