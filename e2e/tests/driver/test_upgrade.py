"""Upgrades, rollbacks and takeovers of a running release, on the harness cluster.

* ``helm upgrade`` from the previous chart version (the chart as it landed at commit b7d2eca,
  checked in as ``fixtures/dra-driver-nvidia-gpu-0.1.0.tgz``, see ``fixtures/README.md``) while
  pods hold prepared claims: the plugin pod is replaced, the pods keep running with the same GPU
  (their fake ``nvidia-smi -L`` keeps listing it), the claims are not prepared a second time
  (checkpoint entry, CDI spec and the new plugin's log), and new claims still work.
* ``helm rollback`` to that revision, with the same guarantees, and unpreparation by the
  rolled-back plugin of a claim the newer one prepared; and a rollback with MPS and
  time-sliced claims prepared (NVIDIA's gpu-test5) keeps their pod running.
* The takeover of DeviceClasses that another release (NVIDIA's) installed, as
  ``deployments/upgrade-and-takeover.md`` describes it.

Needs the local e2e cluster: the releases are installed here, and the checkpoint is read on the
node's disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import HelmFailed
from demo_specs import demo, namespaces_of
from dra_e2e.handle import ClusterHandle
from driver_support import (
    CHART,
    Driver,
    allocated_devices,
    applied,
    checkpoint_claims,
    dump_diagnostics,
    exists,
    helm_path,
    install,
    json_log_lines,
    pod,
    pod_claims,
    run_helm,
    smi_lines,
    uninstall,
    wait_gone,
    wait_running,
)
from sharing_support import running_pods
from upgrade_support import helm_upgrade, plugin_pods_on, retag_driver_image

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parent / "fixtures"
PREVIOUS_CHART = FIXTURES / "dra-driver-nvidia-gpu-0.1.0.tgz"
GPU_CLASSES = ("gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com")
#: How NVIDIA's chart is commonly installed before 25.12's rename (nameOverride).
OTHER_RELEASE = "nvidia-dra-driver-gpu"
GPU_SELECTOR = "device.attributes['gpu.nvidia.com'].type == 'gpu'"


@dataclass
class Releases:
    """What the tests of this module need to install releases of their own."""

    driver: Driver
    #: The values the harness install used (node directories, fake GPUs), as a values file.
    values: Path
    #: The node the tests' pods run on, and whose plugin pod, checkpoint and CDI specs they read.
    node: str


@pytest.fixture(scope="module")
def releases(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Releases]:
    """The images imported and the harness's values, with no release installed."""
    if e2e_cluster.local is None:
        pytest.skip("installs releases of its own and reads the node's checkpoint: local cluster")
    workdir = tmp_path_factory.mktemp("upgrade")
    driver = install(e2e_cluster, workdir)
    values = workdir / "values.json"
    values.write_text(
        run_helm(
            helm_path(),
            "get",
            "values",
            driver.release,
            "--namespace",
            driver.namespace,
            "--output",
            "json",
            env=_env(e2e_cluster),
        )
    )
    uninstall(driver)
    # With DRA_E2E_NODES>=2 the release runs a plugin pod on every node; the tests follow one.
    node = sorted(driver.nodes)[0]
    yield Releases(driver=driver, values=values, node=node)
    if _helm_status(driver) is not None:
        _helm(driver, "uninstall", driver.release, "--wait")


@pytest.fixture(autouse=True)
def _diagnostics_on_failure(request: pytest.FixtureRequest, releases: Releases) -> Iterator[None]:
    """Prints the plugin's logs and recent events when the test failed."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        print(dump_diagnostics(releases.driver))
        # A failed test leaves its release behind; the next test starts without one.
        if _helm_status(releases.driver) is not None:
            _helm(releases.driver, "uninstall", releases.driver.release, "--wait")


def _env(cluster: ClusterHandle) -> dict[str, str]:
    return {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}


def _helm(driver: Driver, *args: str) -> str:
    return run_helm(helm_path(), *args, "--namespace", driver.namespace, env=_env(driver.cluster))


def _helm_status(driver: Driver) -> dict[str, Any] | None:
    proc = subprocess.run(
        [str(helm_path()), "status", driver.release, "--namespace", driver.namespace, "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
        env=_env(driver.cluster),
    )
    return dict(json.loads(proc.stdout)) if proc.returncode == 0 else None


def _install_or_upgrade(releases: Releases, chart: Path, *extra: str) -> str:
    return helm_upgrade(
        releases.driver,
        chart,
        "--install",
        "--create-namespace",
        "--values",
        str(releases.values),
        *extra,
    )


def _history(driver: Driver) -> list[tuple[int, str, str]]:
    """``(revision, chart, status)`` of each revision of the release."""
    rows = json.loads(_helm(driver, "history", driver.release, "--output", "json"))
    return [(int(r["revision"]), str(r["chart"]), str(r["status"])) for r in rows]


def _chart_version(path: Path) -> str:
    return str(yaml.safe_load(path.read_text())["version"])


def _previous_chart_version() -> str:
    with tarfile.open(PREVIOUS_CHART) as tar:
        member = tar.extractfile("dra-driver-nvidia-gpu/Chart.yaml")
        assert member is not None
        return str(yaml.safe_load(member.read())["version"])


def _tag_previous_image(releases: Releases) -> str:
    """Tags the imported driver image as the previous release's, and returns that tag.

    Both releases run the same code; the different tag makes the upgrade replace the plugin pod
    (as a new driver image does) even where the two charts render the same pod template.
    """
    app_version = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])
    tag = f"{app_version}-previous"
    retag_driver_image(releases.driver.cluster, releases.driver.nodes, tag)
    return tag


def _wait_new_plugin(
    driver: Driver, node: str, old_uid: str | None, image_tag: str
) -> dict[str, Any]:
    """Until the one plugin pod of ``node``, other than ``old_uid``, runs the image
    ``image_tag``, is ready and registered with the kubelet.

    The pod of an earlier release or revision may still be terminating, and registered, when
    the new one starts: until it is gone and the new one registered, the kubelet may send a
    claim's prepare to the old one.
    """

    def replaced() -> dict[str, Any] | None:
        pods = plugin_pods_on(driver, node)
        if len(pods) != 1:
            return None
        (plugin,) = pods
        ready = any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in plugin["status"].get("conditions", [])
        )
        image = plugin["spec"]["containers"][0]["image"]
        if plugin["metadata"]["uid"] == old_uid or not ready or not image.endswith(f":{image_tag}"):
            return None
        events = _plugin_events(driver, plugin)
        if not any(e.get("event") == "registration_succeeded" for e in events):
            return None
        return plugin

    found = driver.cluster.wait_until(
        f"a new plugin pod on {image_tag}", replaced, timeout=180, interval=2
    )
    driver.wait_for_slices()
    return dict(found)


def _plugin_events(driver: Driver, plugin: dict[str, Any]) -> list[dict[str, Any]]:
    """The JSON log lines of a plugin pod."""
    logs = driver.cluster.kubectl("logs", plugin["metadata"]["name"], "-n", driver.namespace)
    return json_log_lines(logs)


def _prepared_uids(events: list[dict[str, Any]]) -> list[str]:
    return [str(e.get("claim_uid")) for e in events if e.get("event") == "prepared"]


def _cdi_spec(driver: Driver, node: str, claim_uid: str) -> str:
    (spec,) = [p for p in driver.cdi_dir(node).iterdir() if claim_uid in p.name]
    return spec.read_text()


def _looping_claim_pod(name: str, namespace: str, node: str) -> str:
    """A claim template and a pod on ``node`` that prints ``nvidia-smi -L`` every second until
    stopped."""
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "selectors": [{"cel": {"expression": GPU_SELECTOR}}],
                            },
                        }
                    ]
                }
            }
        },
    }
    pod_obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "ctr",
                    "image": "ubuntu:22.04",
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["bash", "-c"],
                    "args": ["trap 'exit 0' TERM; while true; do nvidia-smi -L; sleep 1; done"],
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
        },
    }
    return json.dumps(template) + "\n---\n" + json.dumps(pod_obj)


@dataclass
class Holder:
    """A running pod with a prepared claim, as it was before the release changed."""

    name: str
    namespace: str
    claim_uid: str
    device: str
    uuid: str
    container_id: str
    restarts: int
    checkpoint_entry: dict[str, Any]
    cdi_spec: str


def _holder(driver: Driver, node: str, name: str, namespace: str) -> Holder:
    cluster = driver.cluster
    wait_running(cluster, name, namespace)
    (claim,) = pod_claims(cluster, name, namespace).values()
    (device,) = allocated_devices(claim)
    uid = claim["metadata"]["uid"]
    uuid = str(driver.devices(node)[device]["attributes"]["uuid"]["string"])
    cluster.wait_until(
        f"nvidia-smi -L in {namespace}/{name}", lambda: _smi_uuids(cluster, name, namespace)
    )
    assert set(_smi_uuids(cluster, name, namespace)) == {uuid}
    (status,) = pod(cluster, name, namespace)["status"]["containerStatuses"]
    entry = checkpoint_claims(driver, node)[uid]
    assert entry["state"] == "PrepareCompleted"
    return Holder(
        name=name,
        namespace=namespace,
        claim_uid=uid,
        device=device,
        uuid=uuid,
        container_id=str(status["containerID"]),
        restarts=int(status["restartCount"]),
        checkpoint_entry=entry,
        cdi_spec=_cdi_spec(driver, node, uid),
    )


def _smi_uuids(cluster: ClusterHandle, name: str, namespace: str) -> list[str]:
    return [u for _, _, u in smi_lines(cluster.kubectl("logs", name, "-n", namespace))]


def _assert_kept(driver: Driver, node: str, holder: Holder, new_plugin: dict[str, Any]) -> None:
    """The pod kept running with its GPU, and its claim was not prepared again."""
    cluster = driver.cluster
    (status,) = pod(cluster, holder.name, holder.namespace)["status"]["containerStatuses"]
    assert "running" in status["state"], status
    assert (str(status["containerID"]), int(status["restartCount"])) == (
        holder.container_id,
        holder.restarts,
    ), "the container was neither restarted nor recreated"
    # Lines printed after the new plugin started still list the same (and only that) GPU.
    seen = len(_smi_uuids(cluster, holder.name, holder.namespace))
    cluster.wait_until(
        f"new nvidia-smi -L lines of {holder.name}",
        lambda: len(_smi_uuids(cluster, holder.name, holder.namespace)) >= seen + 2,
        timeout=30,
    )
    assert set(_smi_uuids(cluster, holder.name, holder.namespace)) == {holder.uuid}
    claims = checkpoint_claims(driver, node)
    assert claims[holder.claim_uid] == holder.checkpoint_entry, "checkpoint entry unchanged"
    others = [
        uid
        for uid, c in claims.items()
        if uid != holder.claim_uid and any(d["deviceName"] == holder.device for d in c["devices"])
    ]
    assert others == [], f"{holder.device} also prepared for {others}"
    assert _cdi_spec(driver, node, holder.claim_uid) == holder.cdi_spec, "CDI spec unchanged"
    assert holder.claim_uid not in _prepared_uids(_plugin_events(driver, new_plugin)), (
        "the new plugin prepared the claim again"
    )


def _assert_unprepared(driver: Driver, node: str, claim_uid: str) -> None:
    wait_gone(
        driver.cluster,
        f"CDI spec of claim {claim_uid} removed",
        lambda: not any(claim_uid in p.name for p in driver.cdi_dir(node).iterdir()),
    )
    assert claim_uid not in checkpoint_claims(driver, node), "checkpoint entry removed"


def test_upgrade_from_the_previous_chart_keeps_prepared_claims_and_rollback_too(
    releases: Releases, e2e_namespace: str
) -> None:
    driver, node = releases.driver, releases.node
    cluster = driver.cluster
    previous_tag = _tag_previous_image(releases)
    _install_or_upgrade(releases, PREVIOUS_CHART, "--set", f"image.tag={previous_tag}")
    old_plugin = _wait_new_plugin(driver, node, None, previous_tag)
    manifests = {
        name: _looping_claim_pod(name, e2e_namespace, node) for name in ("holder", "after-upgrade")
    }
    with applied(cluster, manifests["holder"]):
        holder = _holder(driver, node, "holder", e2e_namespace)
        assert _prepared_uids(_plugin_events(driver, old_plugin)) == [holder.claim_uid]

        out = _install_or_upgrade(releases, CHART)
        assert "GPU backend: fake" in out
        current = f"dra-driver-nvidia-gpu-{_chart_version(CHART / 'Chart.yaml')}"
        previous = f"dra-driver-nvidia-gpu-{_previous_chart_version()}"
        assert _history(driver) == [(1, previous, "superseded"), (2, current, "deployed")]
        app_version = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])
        new_plugin = _wait_new_plugin(driver, node, old_plugin["metadata"]["uid"], app_version)
        _assert_kept(driver, node, holder, new_plugin)

        # The upgraded plugin prepares new claims, on another GPU.
        with applied(cluster, manifests["after-upgrade"]):
            second = _holder(driver, node, "after-upgrade", e2e_namespace)
            assert second.device != holder.device
            assert _prepared_uids(_plugin_events(driver, new_plugin)) == [second.claim_uid]

            _helm(driver, "rollback", driver.release, "1", "--wait", "--timeout", "5m")
            assert _history(driver)[-1] == (3, previous, "deployed")
            rolled_back = _wait_new_plugin(
                driver, node, new_plugin["metadata"]["uid"], previous_tag
            )
            for kept in (holder, second):
                _assert_kept(driver, node, kept, rolled_back)
        # The rolled-back plugin unprepares a claim the newer one prepared.
        _assert_unprepared(driver, node, second.claim_uid)
    _assert_unprepared(driver, node, holder.claim_uid)
    _helm(driver, "uninstall", driver.release, "--wait")


def _foreign_deviceclass(name: str) -> dict[str, Any]:
    """A DeviceClass as another Helm release (NVIDIA's) leaves it."""
    kind = {"gpu.nvidia.com": "gpu", "mig.nvidia.com": "mig", "vfio.gpu.nvidia.com": "vfio"}[name]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {
            "name": name,
            "labels": {
                "app.kubernetes.io/managed-by": "Helm",
                "app.kubernetes.io/instance": OTHER_RELEASE,
            },
            "annotations": {
                "meta.helm.sh/release-name": OTHER_RELEASE,
                "meta.helm.sh/release-namespace": OTHER_RELEASE,
            },
        },
        "spec": {
            "selectors": [
                {
                    "cel": {
                        "expression": "device.driver == 'gpu.nvidia.com' && "
                        f"device.attributes['gpu.nvidia.com'].type == '{kind}'"
                    }
                }
            ]
        },
    }


def test_takeover_adopts_deviceclasses_of_another_release(releases: Releases) -> None:
    driver = releases.driver
    cluster = driver.cluster
    assert _helm_status(driver) is None, "starts without our release"
    created = "\n---\n".join(json.dumps(_foreign_deviceclass(n)) for n in GPU_CLASSES)
    cluster.apply(created)
    try:
        uids = {
            n: cluster.kubectl_json("get", "deviceclass", n)["metadata"]["uid"] for n in GPU_CLASSES
        }
        # Helm refuses to take over objects another release owns, naming object and owner.
        with pytest.raises(HelmFailed, match="invalid ownership metadata") as refused:
            _install_or_upgrade(releases, CHART)
        assert 'DeviceClass "' in str(refused.value)
        assert f'current value is "{OTHER_RELEASE}"' in str(refused.value)

        # The takeover of deployments/upgrade-and-takeover.md: hand the objects to our release.
        cluster.kubectl(
            "annotate",
            "deviceclass",
            *GPU_CLASSES,
            "--overwrite",
            f"meta.helm.sh/release-name={driver.release}",
            f"meta.helm.sh/release-namespace={driver.namespace}",
        )
        _install_or_upgrade(releases, CHART)
        driver.wait_for_slices()
        manifest = _helm(driver, "get", "manifest", driver.release)
        chart_label = f"dra-driver-nvidia-gpu-{_chart_version(CHART / 'Chart.yaml')}"
        for name in GPU_CLASSES:
            assert f"name: {name}\n" in manifest
            adopted = cluster.kubectl_json("get", "deviceclass", name)
            meta = adopted["metadata"]
            assert meta["uid"] == uids[name], "adopted in place, not deleted and recreated"
            assert meta["annotations"]["meta.helm.sh/release-name"] == driver.release
            assert meta["labels"]["app.kubernetes.io/instance"] == driver.release
            assert meta["labels"]["helm.sh/chart"] == chart_label
        gpu = cluster.kubectl_json("get", "deviceclass", "gpu.nvidia.com")
        assert gpu["spec"].get("extendedResourceName") == "nvidia.com/gpu", "our spec applied"
        _helm(driver, "uninstall", driver.release, "--wait")
        for name in GPU_CLASSES:
            assert not exists(cluster, "deviceclass", name), "our uninstall removes what it adopted"
    finally:
        if _helm_status(driver) is not None:
            _helm(driver, "uninstall", driver.release, "--wait")
        cluster.kubectl("delete", "deviceclass", *GPU_CLASSES, "--ignore-not-found")


def test_rollback_keeps_running_pods_of_mps_and_time_sliced_claims(releases: Releases) -> None:
    """NVIDIA's gpu-test5 (one pod, a time-sliced and an MPS GPU) prepared by the current chart;
    ``helm rollback`` to the previous chart keeps the pod's containers, its claim's checkpoint
    entry and CDI spec, and the rolled-back plugin does not prepare the claim again."""
    driver, node = releases.driver, releases.node
    cluster = driver.cluster
    previous_tag = _tag_previous_image(releases)
    # Both revisions run the sharing gates: the rolled-back plugin serves the same claims.
    gates = (
        *("--set", "featureGates.MPSSupport=true"),
        *("--set", "featureGates.TimeSlicingSettings=true"),
    )
    _install_or_upgrade(releases, PREVIOUS_CHART, "--set", f"image.tag={previous_tag}", *gates)
    old_plugin = _wait_new_plugin(driver, node, None, previous_tag)
    _install_or_upgrade(releases, CHART, *gates)
    app_version = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])
    new_plugin = _wait_new_plugin(driver, node, old_plugin["metadata"]["uid"], app_version)
    manifest = demo("quickstart_v1_gpu-test5.yaml")
    with applied(cluster, manifest, namespaces=namespaces_of(manifest)):
        (name,) = running_pods(cluster, "gpu-test5", 1)
        containers = pod(cluster, name, "gpu-test5")["status"]["containerStatuses"]
        (claim,) = pod_claims(cluster, name, "gpu-test5").values()
        uid = str(claim["metadata"]["uid"])
        entry, spec = checkpoint_claims(driver, node)[uid], _cdi_spec(driver, node, uid)

        _helm(driver, "rollback", driver.release, "1", "--wait", "--timeout", "5m")
        rolled_back = _wait_new_plugin(driver, node, new_plugin["metadata"]["uid"], previous_tag)
        after = pod(cluster, name, "gpu-test5")["status"]["containerStatuses"]
        assert [(c["containerID"], c["restartCount"]) for c in after] == [
            (c["containerID"], c["restartCount"]) for c in containers
        ], "no container restarted or recreated"
        assert all("running" in c["state"] for c in after), after
        assert checkpoint_claims(driver, node)[uid] == entry, "checkpoint entry unchanged"
        assert _cdi_spec(driver, node, uid) == spec, "CDI spec unchanged"
        assert uid not in _prepared_uids(_plugin_events(driver, rolled_back)), (
            "the rolled-back plugin prepared the claim again"
        )
    _assert_unprepared(driver, node, uid)
    _helm(driver, "uninstall", driver.release, "--wait")
