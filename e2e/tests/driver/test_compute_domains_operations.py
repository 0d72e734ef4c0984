"""ComputeDomains under the operations NVIDIA's suite puts them through (its bats files
``test_cd_leader_election``, ``test_cd_updowngrade`` and ``test_cd_logging``), on two fake GB200
nodes with NVIDIA's values and demo specs: two controller replicas electing a leader on NVIDIA's
Lease, ``helm upgrade`` to a new image and ``helm rollback`` with a domain and its workload
running, and ``logVerbosity``.

One chart install for the module. The tests run in file order: leader election first (on the
install), the upgrade ends rolled back to the install, and the verbosity test changes
``logVerbosity`` last.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from compute_domain_support import (
    as_list,
    cd_manifest,
    domain_daemons,
    domain_leftovers,
    namespace_manifest,
    nvidia_spec,
    wait_ready,
    worker_pod,
)
from dra_e2e.handle import ClusterHandle
from driver_support import (
    CHART,
    Driver,
    dump_diagnostics,
    exists,
    helm_path,
    install,
    json_log_lines,
    pod,
    run_helm,
    uninstall,
    wait_gone,
    wait_running,
)
from upgrade_support import retag_driver_image, upgrade_reusing_values

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.e2e_nodes(2)]

#: NVIDIA's label on the controller's pods (its bats tests select them by it).
CONTROLLER = "dra-driver-nvidia-gpu-component=controller"
#: NVIDIA's chart names the Lease ``<chart name>-controller``.
LEASE = "dra-driver-nvidia-gpu-controller"
CD_PLUGIN = "compute-domains"
#: The image tag of the "new release" (the imported image, re-tagged on every node).
NEW_TAG = "cd-upgrade"


@pytest.fixture(scope="module")
def driver(
    e2e_cluster_nodes: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart on two fake GB200 nodes, the controller at two replicas with leader election
    (the values of NVIDIA's leader-election test; its timings are the chart's defaults)."""
    installed = install(
        e2e_cluster_nodes,
        tmp_path_factory.mktemp("cd-ops-images"),
        {
            "devices.fakeGpus": "{4xGB200}",
            "resources.computeDomains.enabled": "true",
            "controller.replicas": "2",
            "controller.leaderElection.enabled": "true",
        },
    )
    yield installed
    uninstall(installed)


@pytest.fixture
def ns(driver: Driver, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own; its domains gone with it."""
    name = "cdops-" + request.node.name.removeprefix("test_")[:30].replace("_", "-").rstrip("-")
    driver.cluster.apply(namespace_manifest(name))
    failed_before = request.session.testsfailed
    yield name
    if request.session.testsfailed > failed_before:
        print(_diagnostics(driver))
    driver.cluster.kubectl(
        "delete", "namespace", name, "--ignore-not-found", "--wait=true", "--timeout=150s",
        timeout=180,
    )  # fmt: skip


def _diagnostics(driver: Driver) -> str:
    parts = [dump_diagnostics(driver)]
    cluster = driver.cluster
    for selector in (CONTROLLER, "resource.nvidia.com/computeDomain"):
        items = cluster.kubectl_json("get", "pods", "-n", driver.namespace, "-l", selector)
        for item in items["items"]:
            name = item["metadata"]["name"]
            args = ["logs", name, "-n", driver.namespace, "--tail=60", "--all-containers"]
            try:
                parts.append(f"--- {name}:\n{cluster.kubectl(*args)}")
            except Exception as exc:
                parts.append(f"(no logs of {name}: {exc})")
    if exists(cluster, "lease", LEASE, "-n", driver.namespace):
        parts.append(cluster.kubectl("get", "lease", LEASE, "-n", driver.namespace, "-o", "yaml"))
    return "\n".join(parts)


# --- helpers ----------------------------------------------------------------------------------


def _controllers(driver: Driver) -> list[dict[str, Any]]:
    """The controller's pods that are not being deleted."""
    items = driver.cluster.kubectl_json("get", "pods", "-n", driver.namespace, "-l", CONTROLLER)
    return [p for p in items["items"] if not p["metadata"].get("deletionTimestamp")]


def _ready(item: dict[str, Any]) -> bool:
    conditions = item.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _lease(driver: Driver) -> dict[str, Any]:
    spec = driver.cluster.kubectl_json("get", "lease", LEASE, "-n", driver.namespace)["spec"]
    return dict(spec)


def _logs(driver: Driver, name: str, container: str | None = None) -> list[dict[str, Any]]:
    args = ["logs", name, "-n", driver.namespace, "--tail=-1"]
    args += ["-c", container] if container else ["--all-containers"]
    return json_log_lines(driver.cluster.kubectl(*args))


def _leads(driver: Driver, name: str) -> bool:
    """Whether the controller pod's own log says it leads now (its last leadership change)."""
    changes = [e for e in _logs(driver, name) if e.get("event") == "leader_changed"]
    return bool(changes) and changes[-1].get("leading") is True


def _containers(cluster: ClusterHandle, name: str, namespace: str) -> dict[str, tuple[str, int]]:
    """Container name -> (container ID, restart count) of a running pod."""
    statuses = pod(cluster, name, namespace)["status"].get("containerStatuses") or []
    return {s["name"]: (s.get("containerID", ""), int(s["restartCount"])) for s in statuses}


def _channels(cluster: ClusterHandle, name: str, namespace: str) -> list[str]:
    out = cluster.kubectl(
        "exec", name, "-n", namespace, "--", "ls", "/dev/nvidia-caps-imex-channels"
    )
    return out.split()


def _args(item: dict[str, Any], container: str) -> list[str]:
    (found,) = [c for c in item["spec"]["containers"] if c["name"] == container]
    return list(found.get("args") or [])


def _cd_plugin_on(driver: Driver, node: str, verbosity: int) -> str:
    """The compute-domain plugin's pod on ``node`` that runs at ``verbosity`` (the rollout's)."""
    flag = f"-v={verbosity}"
    (name,) = [
        p["metadata"]["name"]
        for p in driver.plugin_pods()
        if p["spec"].get("nodeName") == node and flag in _args(p, CD_PLUGIN)
    ]
    return str(name)


def _api_detail(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Debug lines about API-server requests (NVIDIA's ``round_trippers.go`` detail, -v 6)."""
    return [e for e in lines if e.get("level") == "debug" and "/api" in str(e.get("msg"))]


def _debug(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in lines if e.get("level") == "debug"]


def _start_workload(driver: Driver, ns: str, name: str) -> tuple[str, str]:
    """A domain ``name`` with one worker pod ``name``, running; returns (node, domain UID)."""
    cluster = driver.cluster
    cluster.apply(as_list(cd_manifest(name, ns), worker_pod(name, ns, name)))
    wait_running(cluster, name, ns, timeout=240)
    uid = wait_ready(cluster, name, ns, nodes=1)["metadata"]["uid"]
    return str(pod(cluster, name, ns)["spec"]["nodeName"]), str(uid)


def _delete_domain(driver: Driver, ns: str, pods: list[str], domain: str, uid: str) -> None:
    cluster = driver.cluster
    cluster.kubectl(
        "delete", "pod", *pods, "-n", ns, "--grace-period=1", "--wait=true", "--timeout=120s",
        timeout=150,
    )  # fmt: skip
    cluster.kubectl("delete", "computedomain", domain, "-n", ns, "--wait=false")
    wait_gone(
        cluster,
        "the domain's objects",
        lambda: not domain_leftovers(cluster, driver.namespace, uid),
        timeout=180,
    )


# --- leader election --------------------------------------------------------------------------


def test_one_of_two_controller_replicas_holds_the_lease_and_the_other_takes_over_mid_workload(
    driver: Driver, ns: str
) -> None:
    cluster = driver.cluster
    cluster.wait_until(
        "two controller replicas Ready",
        lambda: [_ready(p) for p in _controllers(driver)] == [True, True],
        timeout=180,
        interval=2,
    )
    names = sorted(p["metadata"]["name"] for p in _controllers(driver))
    cluster.wait_until(
        f"Lease {LEASE} held by a replica",
        lambda: (
            exists(cluster, "lease", LEASE, "-n", driver.namespace)
            and _lease(driver).get("holderIdentity") in names
        ),
        timeout=60,
        interval=2,
    )
    before = _lease(driver)
    leader = str(before["holderIdentity"])
    # Exactly one replica says it leads: the Lease's holder (it logs once the write is done).
    cluster.wait_until(
        "the holder, and only it, leading",
        lambda: [n for n in names if _leads(driver, n)] == [leader],
        timeout=20,
        interval=1,
    )
    standby = next(n for n in names if n != leader)

    # NVIDIA's demo workload is created, and the leader is force-deleted while its domain is
    # still being set up.
    cluster.apply(nvidia_spec("imex_channel-injection.yaml", ns))
    cluster.kubectl(
        "delete", "pod", leader, "-n", driver.namespace, "--force", "--grace-period=0"
    )  # fmt: skip

    def taken_over() -> bool:
        holder = _lease(driver).get("holderIdentity")
        return bool(holder) and holder != leader

    # NVIDIA's test allows 20 s after the pod is gone; the lease lasts 15 s.
    cluster.wait_until("a new Lease holder", taken_over, timeout=60, interval=1)
    after = _lease(driver)
    assert after["holderIdentity"] in {p["metadata"]["name"] for p in _controllers(driver)}
    assert int(after.get("leaseTransitions") or 0) > int(before.get("leaseTransitions") or 0)
    if after["holderIdentity"] == standby:
        cluster.wait_until("the standby leading", lambda: _leads(driver, standby), timeout=20)

    wait_running(cluster, "imex-channel-injection", ns, timeout=240)
    assert "channel0" in cluster.kubectl("logs", "imex-channel-injection", "-n", ns)
    domain = wait_ready(cluster, "imex-channel-injection", ns, nodes=1)
    # The Deployment brings the second replica back; it stands by.
    cluster.wait_until(
        "two controller replicas Ready again",
        lambda: [_ready(p) for p in _controllers(driver)] == [True, True],
        timeout=180,
        interval=2,
    )
    holder = _lease(driver)["holderIdentity"]
    names = [p["metadata"]["name"] for p in _controllers(driver)]
    assert holder in names
    assert [n for n in names if _leads(driver, n)] == [holder]
    _delete_domain(
        driver, ns, ["imex-channel-injection"], "imex-channel-injection", domain["metadata"]["uid"]
    )


# --- upgrade and rollback ---------------------------------------------------------------------


def _helm_rollback(driver: Driver) -> str:
    """``helm rollback`` of the release to its previous revision, waiting for the rollout."""
    return run_helm(
        helm_path(),
        "rollback", driver.release, "--namespace", driver.namespace, "--wait", "--timeout", "5m",
        env={**os.environ, "KUBECONFIG": str(driver.cluster.kubeconfig)},
    )  # fmt: skip


def _images(driver: Driver) -> set[str]:
    """The images of the controller's and the plugins' pods."""
    pods = _controllers(driver) + driver.plugin_pods()
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return {c["image"] for p in live for c in p["spec"]["containers"]}


def _tags(driver: Driver) -> set[str]:
    return {image.rsplit(":", 1)[1] for image in _images(driver)}


def test_helm_upgrade_and_rollback_leave_a_running_domain_and_its_workload_alone(
    driver: Driver, ns: str
) -> None:
    cluster = driver.cluster
    _, uid = _start_workload(driver, ns, "cd")
    running = _containers(cluster, "cd", ns)
    assert _channels(cluster, "cd", ns) == ["channel0"]
    app_version = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])
    retag_driver_image(cluster, driver.nodes, NEW_TAG)

    steps: list[tuple[str, str, Callable[[], object]]] = [
        (
            "upgrade",
            NEW_TAG,
            lambda: upgrade_reusing_values(driver, {"image.tag": NEW_TAG}),
        ),
        ("rollback", app_version, lambda: _helm_rollback(driver)),
    ]
    for step, tag, run in steps:
        run()
        cluster.wait_until(
            f"every driver pod on :{tag} after the {step}",
            lambda: _tags(driver) == {tag},  # noqa: B023 (called within this iteration)
            timeout=120,
            interval=2,
        )
        # The workload was not touched: same containers, never restarted, channel still there.
        assert _containers(cluster, "cd", ns) == running, step
        assert _channels(cluster, "cd", ns) == ["channel0"], step
        domain = wait_ready(cluster, "cd", ns, nodes=1)
        assert domain["metadata"]["uid"] == uid, step
        assert domain_daemons(cluster, driver.namespace, uid), step
        # A new workload on the domain still starts, with its channel.
        worker = f"after-{step}"
        cluster.apply(as_list(worker_pod(worker, ns, "cd")))
        wait_running(cluster, worker, ns, timeout=240)
        assert "channel0" in cluster.kubectl("logs", worker, "-n", ns).split(), step
        # Each node publishes one channel of the domain: the worker gives its own back.
        cluster.kubectl(
            "delete", "pod", worker, "-n", ns, "--grace-period=1", "--wait=true",
            "--timeout=120s", timeout=150,
        )  # fmt: skip
    _delete_domain(driver, ns, ["cd"], "cd", uid)


# --- log verbosity ----------------------------------------------------------------------------


def _set_verbosity(driver: Driver, level: int) -> None:
    upgrade_reusing_values(driver, {"logVerbosity": str(level)})


def _controller_lines(driver: Driver, verbosity: int) -> list[dict[str, Any]]:
    """The log lines of the controller replicas that run at ``verbosity`` (the rollout's)."""
    pods = [p for p in _controllers(driver) if f"-v={verbosity}" in _args(p, "compute-domain")]
    assert len(pods) == 2, [p["metadata"]["name"] for p in _controllers(driver)]
    return [e for p in pods for e in _logs(driver, p["metadata"]["name"])]


def test_log_verbosity_changes_what_the_controller_plugin_and_daemons_log(
    driver: Driver, ns: str
) -> None:
    cluster = driver.cluster
    # NVIDIA's default, 4 (as installed): the controller's own debug lines ("Processing added or
    # updated ComputeDomain", its -v 2), but no API request detail and no gRPC request detail
    # in the plugin (both -v 6).
    node, uid = _start_workload(driver, ns, "v4")
    lines = _controller_lines(driver, 4)
    assert [e for e in lines if e.get("event") == "reconcile" and e.get("domain_uid") == uid]
    assert _api_detail(lines) == []
    plugin = _logs(driver, _cd_plugin_on(driver, node, 4), CD_PLUGIN)
    assert [e for e in plugin if e.get("event") == "request_started"] == []
    (daemon,) = domain_daemons(cluster, driver.namespace, uid)
    assert _api_detail(_logs(driver, daemon["metadata"]["name"])) == []
    _delete_domain(driver, ns, ["v4"], "v4", uid)

    # 6: API request detail in the controller and the daemons, gRPC request detail in the plugin.
    _set_verbosity(driver, 6)
    node, uid = _start_workload(driver, ns, "v6")
    assert _api_detail(_controller_lines(driver, 6))
    plugin = _logs(driver, _cd_plugin_on(driver, node, 6), CD_PLUGIN)
    assert [e for e in plugin if e.get("event") == "request_started"]
    (daemon,) = domain_daemons(cluster, driver.namespace, uid)
    assert _api_detail(_logs(driver, daemon["metadata"]["name"]))
    _delete_domain(driver, ns, ["v6"], "v6", uid)

    # 0: the configuration at start, and no debug line at all.
    _set_verbosity(driver, 0)
    node, uid = _start_workload(driver, ns, "v0")
    lines = _controller_lines(driver, 0)
    starts = [e for e in lines if e.get("event") == "start"]
    assert {(e.get("verbosity"), e.get("lease")) for e in starts} == {
        (0, f"{driver.namespace}/{LEASE}")
    }
    assert _debug(lines) == []
    plugin = _logs(driver, _cd_plugin_on(driver, node, 0), CD_PLUGIN)
    assert [e for e in plugin if e.get("event") == "started"]
    assert _debug(plugin) == []
    (daemon,) = domain_daemons(cluster, driver.namespace, uid)
    assert _debug(_logs(driver, daemon["metadata"]["name"])) == []
    _delete_domain(driver, ns, ["v0"], "v0", uid)
