"""The chart's least privilege and prestart check, proven on the real API server and kubelet.

* The kubelet plugin's own credentials (a token bound to its pod, so it carries the node name
  as the kubelet-plugin pod really has it) may write its node's ResourceSlices, but creating,
  replacing and deleting another node's slice is refused by the chart's admission policy; RBAC
  refuses what the plugin never does (patch, get by name, claims beyond get). Its
  ``nodes: patch`` cannot change a label or annotation of its Node other than its own labels.
* The chart's init container, run by the kubelet from the rendered DaemonSet, waits for a driver
  root without the driver, with the hint in its log, and lets the pod start once it appears.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_render import render_objects
from dra_e2e.errors import KubectlError
from dra_e2e.handle import ClusterHandle
from driver_support import (
    DRIVER,
    Driver,
    helm_path,
    install,
    uninstall,
)
from upgrade_support import upgrade_reusing_values

# driver_diagnostics: conftest.py.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

OTHER_NODE = "e2e-another-node"
POLICY_DENIAL = "may only write ResourceSlices with spec.nodeName"


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart with compute domains on (the harness's seed values switch them off): only
    then does the plugin's account get ``nodes: patch`` and the Node admission policy."""
    installed = install(
        e2e_cluster,
        tmp_path_factory.mktemp("driver-images"),
        {"resources.computeDomains.enabled": "true"},
    )
    yield installed
    uninstall(installed)


def _plugin_pod(driver: Driver) -> dict[str, Any]:
    pods = [p for p in driver.plugin_pods() if p["status"].get("phase") == "Running"]
    assert pods, "a running kubelet plugin pod"
    return pods[0]


def _token_kubeconfig(cluster: ClusterHandle, token: str, path: Path) -> ClusterHandle:
    """A handle that authenticates with ``token`` only (no client certificate)."""
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    (entry,) = admin["clusters"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": entry["cluster"]}],
        "users": [{"name": "plugin", "user": {"token": token}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "plugin"}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    return ClusterHandle(kubeconfig=path, kubectl_path=cluster.kubectl_path)


@pytest.fixture(scope="module")
def plugin_identity(driver: Driver, tmp_path_factory: pytest.TempPathFactory) -> ClusterHandle:
    """kubectl as the plugin: its service account's token, bound to its running pod."""
    pod = _plugin_pod(driver)
    token = driver.cluster.kubectl(
        "create",
        "token",
        pod["spec"]["serviceAccountName"],
        "-n",
        driver.namespace,
        "--bound-object-kind=Pod",
        f"--bound-object-name={pod['metadata']['name']}",
        f"--bound-object-uid={pod['metadata']['uid']}",
        "--duration=30m",
    ).strip()
    path = tmp_path_factory.mktemp("plugin-identity") / "kubeconfig"
    return _token_kubeconfig(driver.cluster, token, path)


def _slice(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": f"e2e-pool-{name}", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}],
        },
    }


@pytest.fixture
def foreign_slice(driver: Driver) -> Iterator[dict[str, Any]]:
    """A slice of another node, created by the cluster admin."""
    name = f"e2e-foreign-{uuid.uuid4().hex[:6]}"
    driver.cluster.apply(json.dumps(_slice(name, OTHER_NODE)))
    try:
        yield dict(driver.cluster.kubectl_json("get", "resourceslice", name))
    finally:
        driver.cluster.kubectl("delete", "resourceslice", name, "--ignore-not-found")


def test_the_plugins_token_carries_its_node(driver: Driver, plugin_identity: ClusterHandle) -> None:
    review = plugin_identity.kubectl_json("auth", "whoami")
    info = review["status"]["userInfo"]
    sa = _plugin_pod(driver)["spec"]["serviceAccountName"]
    assert info["username"] == f"system:serviceaccount:{driver.namespace}:{sa}"
    node = _plugin_pod(driver)["spec"]["nodeName"]
    assert info["extra"]["authentication.kubernetes.io/node-name"] == [node]


def test_the_plugin_may_write_its_own_nodes_slice(
    driver: Driver, plugin_identity: ClusterHandle
) -> None:
    node = _plugin_pod(driver)["spec"]["nodeName"]
    name = f"e2e-own-{uuid.uuid4().hex[:6]}"
    try:
        # create, not apply: apply GETs first, and the plugin never GETs a slice by name.
        plugin_identity.kubectl("create", "-f", "-", input_text=json.dumps(_slice(name, node)))
    finally:
        # The plugin's publisher may already have removed it: its node's extra slice.
        driver.cluster.kubectl("delete", "resourceslice", name, "--ignore-not-found")


def test_the_plugin_may_not_create_another_nodes_slice(
    driver: Driver, plugin_identity: ClusterHandle
) -> None:
    name = f"e2e-denied-{uuid.uuid4().hex[:6]}"
    try:
        with pytest.raises(KubectlError) as err:
            plugin_identity.kubectl(
                "create", "-f", "-", input_text=json.dumps(_slice(name, OTHER_NODE))
            )
        assert POLICY_DENIAL in err.value.stderr
        assert f"not '{OTHER_NODE}'" in err.value.stderr
    finally:
        driver.cluster.kubectl("delete", "resourceslice", name, "--ignore-not-found")
    assert not driver.cluster.kubectl("get", "resourceslice", name, "--ignore-not-found")


def test_the_plugin_may_not_update_another_nodes_slice(
    driver: Driver, plugin_identity: ClusterHandle, foreign_slice: dict[str, Any]
) -> None:
    changed = json.loads(json.dumps(foreign_slice))
    changed["spec"]["devices"].append({"name": "gpu-1"})
    # A PUT, as the plugin updates slices: RBAC grants update, the policy must refuse it.
    with pytest.raises(KubectlError) as err:
        plugin_identity.kubectl("replace", "-f", "-", input_text=json.dumps(changed))
    assert POLICY_DENIAL in err.value.stderr
    after = driver.cluster.kubectl_json("get", "resourceslice", foreign_slice["metadata"]["name"])
    assert [d["name"] for d in after["spec"]["devices"]] == ["gpu-0"]


def test_the_plugin_may_not_delete_another_nodes_slice(
    driver: Driver, plugin_identity: ClusterHandle, foreign_slice: dict[str, Any]
) -> None:
    name = foreign_slice["metadata"]["name"]
    with pytest.raises(KubectlError) as err:
        plugin_identity.kubectl("delete", "resourceslice", name, "--wait=false")
    assert POLICY_DENIAL in err.value.stderr
    assert driver.cluster.kubectl_json("get", "resourceslice", name)["spec"]["nodeName"] == (
        OTHER_NODE
    )


def test_credentials_without_a_node_are_refused(driver: Driver) -> None:
    # Impersonating the service account drops the pod binding: no node name to check against.
    sa = _plugin_pod(driver)["spec"]["serviceAccountName"]
    name = f"e2e-nonode-{uuid.uuid4().hex[:6]}"
    node = _plugin_pod(driver)["spec"]["nodeName"]
    try:
        with pytest.raises(KubectlError) as err:
            driver.cluster.kubectl(
                f"--as=system:serviceaccount:{driver.namespace}:{sa}",
                "create",
                "-f",
                "-",
                input_text=json.dumps(_slice(name, node)),
            )
        assert "credentials carry no node name" in err.value.stderr
    finally:
        driver.cluster.kubectl("delete", "resourceslice", name, "--ignore-not-found")


NODE_DENIAL = "the kubelet plugin may only change the label(s) resource.nvidia.com/computeDomain"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (["label", "e2e-foreign-label=1"], "metadata.labels e2e-foreign-label"),
        (["annotate", "e2e-foreign-annotation=1"], "metadata.annotations"),
    ],
)
def test_the_plugin_may_not_change_other_fields_of_its_node(
    driver: Driver, plugin_identity: ClusterHandle, change: list[str], field: str
) -> None:
    node = _plugin_pod(driver)["spec"]["nodeName"]
    verb, assignment = change
    key = assignment.split("=")[0]
    try:
        with pytest.raises(KubectlError) as err:
            plugin_identity.kubectl(verb, "node", node, assignment)
        assert NODE_DENIAL in err.value.stderr
        assert f"not {field}" in err.value.stderr
        meta = driver.cluster.kubectl_json("get", "node", node)["metadata"]
        assert key not in (meta.get("labels") or {})
        assert key not in (meta.get("annotations") or {})
    finally:
        # Only if the policy let it through: the admin takes it off again.
        with contextlib.suppress(KubectlError):
            driver.cluster.kubectl(verb, "node", node, f"{key}-")


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    [
        ("list", "resourceslices.resource.k8s.io", True),
        ("watch", "resourceslices.resource.k8s.io", True),
        ("update", "resourceslices.resource.k8s.io", True),
        ("patch", "resourceslices.resource.k8s.io", False),
        ("get", "resourceslices.resource.k8s.io", False),
        ("deletecollection", "resourceslices.resource.k8s.io", False),
        ("get", "resourceclaims.resource.k8s.io", True),
        ("list", "resourceclaims.resource.k8s.io", False),
        ("update", "resourceclaims.resource.k8s.io", False),
        ("get", "deviceclasses.resource.k8s.io", False),
        ("get", "secrets", False),
        ("create", "events", True),
        ("patch", "events", False),
    ],
)
def test_rbac_grants_only_what_the_plugin_does(
    plugin_identity: ClusterHandle, verb: str, resource: str, allowed: bool
) -> None:
    try:
        answer = plugin_identity.kubectl("auth", "can-i", verb, resource, "-A").strip()
    except KubectlError as exc:  # `can-i` exits 1 for "no"
        answer = exc.stderr.strip() or "no"
    assert answer.startswith("yes") is allowed, f"{verb} {resource}: {answer}"


# --- the prestart check, run by the kubelet ------------------------------------------------


def _init_pod(driver: Driver, driver_root: Path, namespace: str) -> dict[str, Any]:
    """A pod with the chart's init container (backend nvml) and a main container that exits.

    Rendered from the chart, then reduced to what the check needs: the driver root volume and
    the driver image the session imported (never pulled).
    """
    objects = render_objects(
        helm_path(),
        {
            "nvidiaDriverRoot": str(driver_root),
            "image.pullPolicy": "Never",
        },
    )
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    template = ds["spec"]["template"]["spec"]
    (init,) = template["initContainers"]
    volume = next(v for v in template["volumes"] if v["name"] == "driver-root")
    node = _plugin_pod(driver)["spec"]["nodeName"]
    image = _plugin_pod(driver)["spec"]["containers"][0]["image"]
    init["image"] = image
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "prestart", "namespace": namespace},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "initContainers": [init],
            "containers": [
                {
                    "name": "started",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-c", "print('driver root ready')"],
                }
            ],
            "volumes": [volume],
        },
    }


@contextmanager
def _shared_mount(path: Path, enter: Callable[[list[str]], list[str]]) -> Iterator[None]:
    """Make ``path`` a shared mount in the node's mount namespace, as ``/`` is on a systemd
    node.

    The chart mounts the driver root with HostToContainer propagation (so the GPU Operator's
    later mount shows), which the runtime only allows on a shared or slave mount. Each harness
    node runs in a private mount namespace of its own, so the mount must be made there (the
    files below it are the host's, the same filesystem).
    """
    subprocess.run(enter(["mount", "--bind", str(path), str(path)]), check=True)
    try:
        subprocess.run(enter(["mount", "--make-rshared", str(path)]), check=True)
        yield
    finally:
        subprocess.run(enter(["umount", "--lazy", str(path)]), check=False)


def _init_log(cluster: ClusterHandle, namespace: str) -> str:
    try:
        return cluster.kubectl("logs", "prestart", "-c", "init", "-n", namespace)
    except KubectlError:
        return ""


def test_init_container_waits_for_the_driver_and_explains(
    driver: Driver, e2e_namespace: str
) -> None:
    if not driver.local:
        pytest.skip("needs the node's file system (the local e2e cluster)")
    cluster = driver.cluster
    assert cluster.local is not None
    # The pod runs where the plugin pod runs (see _init_pod).
    node_name = _plugin_pod(driver)["spec"]["nodeName"]
    (node,) = [n for n in cluster.local.state.nodes if n.name == node_name]
    with (
        tempfile.TemporaryDirectory(prefix="e2e-driver-root-") as tmp,
        _shared_mount(Path(tmp), node.mounts.enter),
    ):
        root = Path(tmp)
        cluster.apply(json.dumps(_init_pod(driver, root, e2e_namespace)))
        log = cluster.wait_until(
            "the init container to explain the missing driver",
            lambda: (
                "no libnvidia-ml.so.1" in _init_log(cluster, e2e_namespace)
                and _init_log(cluster, e2e_namespace)
            ),
            timeout=120,
            interval=2,
        )
        line = json.loads(log.splitlines()[0])
        assert line["event"] == "driver_missing"
        assert line["root"] == str(root)
        assert "set nvidiaDriverRoot to where the driver is installed" in line["hint"]
        status = cluster.kubectl_json("get", "pod", "prestart", "-n", e2e_namespace)["status"]
        assert status["phase"] == "Pending", "the pod waits in its init container"
        # The driver appears (as the GPU Operator's driver container would install it).
        lib = root / "usr/lib64/libnvidia-ml.so.1"
        lib.parent.mkdir(parents=True)
        lib.write_bytes(b"\x7fELF stand-in")
        cluster.wait_until(
            "the pod to start after the driver appeared",
            lambda: (
                cluster.kubectl_json("get", "pod", "prestart", "-n", e2e_namespace)["status"][
                    "phase"
                ]
                == "Succeeded"
            ),
            timeout=120,
            interval=2,
        )
        found = json.loads(_init_log(cluster, e2e_namespace).splitlines()[-1])
        assert found["event"] == "driver_found"
        assert found["library"] == f"{root}/usr/lib64/libnvidia-ml.so.1"
        cluster.kubectl("delete", "pod", "prestart", "-n", e2e_namespace, "--wait=true")


# --- NVIDIA's feature gates: accepted, never a crash loop (last: it upgrades the release) -----


def test_nvidias_feature_gates_start_the_plugin_and_are_logged(driver: Driver) -> None:
    if not driver.installed_here:
        pytest.skip("the release was installed by kind/up.sh")
    # Gates NVIDIA has and this project has not built (MPSSupport and the other sharing gates
    # are built now, so they are not named in the line).
    gates = {
        "NVMLDeviceHealthCheck": "true",
        "LoggingAlphaOptions": "true",
        "ContextualLogging": "true",
    }
    upgrade_reusing_values(
        driver, {f"featureGates.{name}": on for name, on in gates.items()}, timeout="3m"
    )
    driver.cluster.kubectl(
        "rollout",
        "status",
        "-n",
        driver.namespace,
        f"daemonset/{driver.release}-kubelet-plugin",
        "--timeout=120s",
    )
    pod = _plugin_pod(driver)
    # Both plugins (gpus and compute-domains) started with the gates, none restarted.
    statuses = pod["status"]["containerStatuses"]
    assert {s["name"] for s in statuses} == {"gpus", "compute-domains"}
    assert all(s["restartCount"] == 0 and s["ready"] is True for s in statuses), statuses
    log = driver.cluster.kubectl(
        "logs", pod["metadata"]["name"], "-n", driver.namespace, "-c", "gpus"
    )
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    (pending,) = [line for line in lines if line.get("event") == "feature_gates_not_implemented"]
    assert pending["gates"] == dict.fromkeys(gates, True)
    driver.wait_for_slices()
