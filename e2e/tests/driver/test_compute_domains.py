"""ComputeDomains on fake GB200 nodes: NVIDIA's IMEX demo specs, unchanged, against the real
chart (controller Deployment, compute-domains plugin container, domain daemons with the IMEX
stand-in), and the faults the issue names.

One chart install for the module, on a cluster of two nodes (``e2e_nodes(2)``) whose fake fleet
is ``4xGB200``: the nodes of one harness cluster share an NVLink clique.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from compute_domain_support import (
    DOMAIN_LABEL,
    as_list,
    cd_manifest,
    domain_daemons,
    domain_events,
    domain_leftovers,
    domain_object,
    namespace_manifest,
    nvidia_spec,
    spec_in_namespace,
    wait_ready,
    worker_pod,
)
from dra_e2e.handle import ClusterHandle
from driver_support import (
    Driver,
    applied,
    dump_diagnostics,
    exists,
    install,
    uninstall,
    wait_gone,
    wait_running,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.e2e_nodes(2)]

CD_DRIVER = "compute-domain.nvidia.com"
LABEL = DOMAIN_LABEL
#: The ComputeDomain of NVIDIA's demo/specs/imex/nvbandwidth-test-job-1.yaml, verbatim (the
#: rest of that file is an MPIJob, which needs the MPI operator).
NVBANDWIDTH_DOMAIN = """\
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata:
  name: nvbandwidth-test-compute-domain-1
spec:
  numNodes: 2
  channel:
    resourceClaimTemplate:
      name: nvbandwidth-test-compute-domain-1-channel
"""


@pytest.fixture(scope="module")
def driver(
    e2e_cluster_nodes: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart on two fake GB200 nodes."""
    installed = install(
        e2e_cluster_nodes,
        tmp_path_factory.mktemp("cd-images"),
        {
            "devices.fakeGpus": "{4xGB200}",
            # The seed's values (the harness's base) switch compute domains off.
            "resources.computeDomains.enabled": "true",
            "kubeletPlugin.containers.computeDomains.gpuCliqueLabelEnabled": "true",
        },
    )
    yield installed
    uninstall(installed)


@pytest.fixture(autouse=True)
def diagnostics(request: pytest.FixtureRequest, driver: Driver) -> Iterator[None]:
    """Plugin logs, controller logs and events when a test failed."""
    failed_before = request.session.testsfailed
    yield
    if request.session.testsfailed > failed_before:
        print(dump_diagnostics(driver))
        for selector in ("app.kubernetes.io/component=compute-domain-controller", LABEL):
            try:
                print(driver.cluster.kubectl(
                    "logs", "-n", driver.namespace, "-l", selector, "--tail=80",
                    "--all-containers", "--prefix",
                ))  # fmt: skip
            except Exception as exc:
                print(f"(no logs for {selector}: {exc})")


def test_a_compute_domain_slice_per_node_next_to_the_gpu_one(driver: Driver) -> None:
    # The seed's `kubectl get resourceslice` view.
    out = driver.cluster.kubectl("get", "resourceslices", "--no-headers")
    for node in driver.nodes:
        rows = [line.split() for line in out.splitlines() if node in line]
        assert {r[2] for r in rows} >= {"gpu.nvidia.com", CD_DRIVER}, out
    slices = driver.cluster.kubectl_json("get", "resourceslices")["items"]
    cd = [s for s in slices if s["spec"]["driver"] == CD_DRIVER]
    assert len(cd) == len(driver.nodes)
    for s in cd:
        devices = {d["name"]: d["attributes"]["type"]["string"] for d in s["spec"]["devices"]}
        assert devices == {"daemon-0": "daemon", "channel-0": "channel"}
    # gpuCliqueLabelEnabled: each node carries its clique ID (the fake GB200s share one).
    from dra_nvlib.identity import cluster_uuid

    clique = f"{cluster_uuid('fake-nvlink-domain')}.1"
    for node in driver.nodes:
        labels = driver.cluster.kubectl_json("get", "node", node)["metadata"]["labels"]
        assert labels.get("nvidia.com/gpu.clique") == clique, labels


@pytest.mark.parametrize(
    ("spec", "pod", "expected"),
    [
        ("imex_channel-injection.yaml", "imex-channel-injection", ["channel0"]),
        (
            "imex_channel-injection-all.yaml",
            "imex-channel-injection-all",
            ["channel0", "channel2047"],
        ),
    ],
)
def test_nvidia_channel_injection_specs(
    driver: Driver, spec: str, pod: str, expected: list[str]
) -> None:
    cluster = driver.cluster
    ns = "cd-" + pod.removeprefix("imex-")[:20]
    cluster.apply(namespace_manifest(ns))
    try:
        with applied(cluster, nvidia_spec(spec, ns)):
            wait_running(cluster, pod, ns, timeout=240)
            log = cluster.kubectl("logs", pod, "-n", ns)
            for channel in expected:
                assert channel in log, log
            if "channel2047" not in expected:
                assert "channel1" not in log.split(), log
            domain = wait_ready(cluster, pod, ns, nodes=1)
            uid = domain["metadata"]["uid"]
            node = cluster.kubectl_json("get", "pod", pod, "-n", ns)["spec"]["nodeName"]
            assert [n["name"] for n in domain["status"]["nodes"]] == [node]
            assert domain_leftovers(driver.cluster, driver.namespace, uid)
        # The domain was deleted with the pod: nothing of it stays.
        wait_gone(
            cluster,
            "the domain's objects",
            lambda: not domain_leftovers(driver.cluster, driver.namespace, uid),
        )
        wait_gone(
            cluster, "the domain", lambda: not exists(cluster, "computedomain", pod, "-n", ns)
        )
    finally:
        cluster.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false")


@pytest.fixture
def ns(driver: Driver, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of the test's own."""
    name = "cd-" + request.node.name.removeprefix("test_")[:40].replace("_", "-").rstrip("-")
    driver.cluster.apply(namespace_manifest(name))
    yield name
    driver.cluster.kubectl(
        "delete",
        "namespace",
        name,
        "--ignore-not-found",
        "--wait=true",
        "--timeout=120s",
        timeout=150,
    )


def test_workload_in_another_namespace_is_refused_with_the_reason(driver: Driver, ns: str) -> None:
    cluster = driver.cluster
    other = ns + "-b"
    cluster.apply(namespace_manifest(other))
    try:
        cluster.apply(as_list(cd_manifest("cd", ns)))
        uid = domain_object(cluster, "cd", ns)["metadata"]["uid"]
        claim = {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "stolen", "namespace": other},
            "spec": {"devices": {
                "requests": [{"name": "channel", "exactly": {
                    "deviceClassName": "compute-domain-default-channel.nvidia.com"}}],
                "config": [{"requests": ["channel"], "opaque": {
                    "driver": CD_DRIVER, "parameters": {
                        "apiVersion": "resource.nvidia.com/v1beta1",
                        "kind": "ComputeDomainChannelConfig", "domainID": uid}}}],
            }},
        }  # fmt: skip
        cluster.apply(as_list(claim, worker_pod("thief", other, None, "stolen")))
        cluster.wait_until(
            "the prepare error naming the namespaces",
            lambda: "differs from ComputeDomain" in domain_events(cluster, other, "thief"),
            timeout=120, interval=3,
        )  # fmt: skip
        assert not cluster.kubectl_json("get", "nodes", "-l", f"{LABEL}={uid}")["items"]
    finally:
        cluster.kubectl("delete", "namespace", other, "--ignore-not-found", "--wait=false")


def test_controller_and_daemon_killed_mid_way_recover_and_deletion_cleans_up(
    driver: Driver, ns: str
) -> None:
    cluster = driver.cluster
    cluster.apply(as_list(cd_manifest("cd", ns)))
    # The controller dies right after the domain appears (mid-reconcile).
    cluster.kubectl(
        "delete",
        "pod",
        "-n",
        driver.namespace,
        "-l",
        "app.kubernetes.io/component=compute-domain-controller",
        "--wait=false",
    )
    cluster.wait_until(
        "the workload template",
        lambda: exists(cluster, "resourceclaimtemplate", "cd", "-n", ns),
        timeout=120,
        interval=2,
    )
    cluster.apply(as_list(worker_pod("w0", ns, "cd")))
    wait_running(cluster, "w0", ns, timeout=240)
    assert "channel0" in cluster.kubectl("logs", "w0", "-n", ns)
    domain = wait_ready(cluster, "cd", ns, nodes=1)
    uid = domain["metadata"]["uid"]
    # A daemon dies: its DaemonSet brings it back and the domain is Ready again.
    before = cluster.kubectl_json("get", "pods", "-n", driver.namespace, "-l", f"{LABEL}={uid}")[
        "items"
    ]
    assert len(before) == 1
    cluster.kubectl(
        "delete", "pod", "-n", driver.namespace, before[0]["metadata"]["name"], "--grace-period=1"
    )

    def replaced_and_ready() -> bool:
        pods = cluster.kubectl_json("get", "pods", "-n", driver.namespace, "-l", f"{LABEL}={uid}")[
            "items"
        ]
        fresh = [p for p in pods if p["metadata"]["uid"] != before[0]["metadata"]["uid"]]
        status = domain_object(cluster, "cd", ns).get("status") or {}
        return bool(fresh) and status.get("status") == "Ready"

    cluster.wait_until("a new daemon, domain Ready", replaced_and_ready, timeout=180, interval=2)
    # The domain is deleted while its workload runs: every object and label goes.
    cluster.kubectl("delete", "computedomain", "cd", "-n", ns, "--wait=false")
    wait_gone(
        cluster,
        "the domain's objects",
        lambda: not domain_leftovers(driver.cluster, driver.namespace, uid),
    )
    wait_gone(cluster, "the domain", lambda: not exists(cluster, "computedomain", "cd", "-n", ns))
    assert "Deleted" in domain_events(cluster, ns, "cd")


def test_two_nodes_like_the_nvbandwidth_job(driver: Driver, ns: str) -> None:
    # imex_nvbandwidth-test-job-1.yaml: its ComputeDomain unchanged (numNodes: 2); its MPIJob
    # workers as a StatefulSet with pod anti-affinity (the MPI operator cannot be built here).
    cluster = driver.cluster
    assert len(driver.nodes) >= 2
    cluster.apply(spec_in_namespace(NVBANDWIDTH_DOMAIN, ns))
    name = "nvbandwidth-test-compute-domain-1"
    labels = {"app": "nvbandwidth-worker"}
    worker = worker_pod("w", ns, f"{name}-channel")["spec"]
    worker["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "nvbandwidth-workers", "namespace": ns},
        "spec": {"replicas": 2, "serviceName": "nvbandwidth-workers",
                 "podManagementPolicy": "Parallel", "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": worker}},
    }  # fmt: skip
    cluster.apply(as_list(sts))
    pods = [f"nvbandwidth-workers-{i}" for i in range(2)]
    for p in pods:
        wait_running(cluster, p, ns, timeout=300)
        assert "channel0" in cluster.kubectl("logs", p, "-n", ns).split()
    nodes = {cluster.kubectl_json("get", "pod", p, "-n", ns)["spec"]["nodeName"] for p in pods}
    assert len(nodes) == 2
    domain = wait_ready(cluster, name, ns, nodes=2)
    assert {n["name"] for n in domain["status"]["nodes"]} == nodes
    uid = domain["metadata"]["uid"]
    daemons = cluster.kubectl_json("get", "pods", "-n", driver.namespace, "-l", f"{LABEL}={uid}")[
        "items"
    ]
    ips = {d["status"]["podIP"] for d in daemons}
    assert len(daemons) == 2
    for daemon in daemons:
        # Each daemon's IMEX (the stand-in) resolves both DNS names to the two daemons' IPs.
        def lists_both(d: dict[str, Any] = daemon) -> bool:
            out = cluster.kubectl(
                "exec",
                "-n",
                driver.namespace,
                d["metadata"]["name"],
                "--",
                "dra-fake-imex",
                "ctl",
                "-c",
                "/imexd/imexd.cfg",
                "-N",
            )
            resolved = {line.split()[2] for line in out.splitlines()[:2]}
            return resolved == ips

        cluster.wait_until("daemons list each other", lists_both, timeout=60, interval=2)
    cluster.kubectl("delete", "statefulset", "nvbandwidth-workers", "-n", ns, "--wait=true")
    cluster.kubectl("delete", "computedomain", name, "-n", ns, "--wait=false")
    wait_gone(
        cluster,
        "the domain's objects",
        lambda: not domain_leftovers(driver.cluster, driver.namespace, uid),
    )


def _hosts_ips(driver: Driver, daemon: dict[str, Any]) -> set[str]:
    """The peer IPs in the daemon's managed ``/etc/hosts`` block (what IMEX resolves)."""
    from dra_computedomain.hosts import parse_managed

    text = driver.cluster.kubectl(
        "exec", "-n", driver.namespace, daemon["metadata"]["name"], "--", "cat", "/etc/hosts"
    )
    return set(parse_managed(text).values())


def test_a_drained_node_leaves_the_domain_and_comes_back(driver: Driver, ns: str) -> None:
    # NVIDIA's failover case: one node of a 2-node domain is drained (its workload evicted, so
    # its channel claim is unprepared, its node label and then its daemon go). The domain
    # drops the node (NotReady below numNodes), the other daemon keeps running and forgets its
    # peer; once the node is back, the domain is Ready on both again.
    cluster = driver.cluster
    cluster.apply(as_list(cd_manifest("cd", ns, num_nodes=2)))
    labels = {"app": "cd-leave"}
    worker = worker_pod("w", ns, "cd")["spec"]
    worker["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "workers", "namespace": ns},
        "spec": {"replicas": 2, "serviceName": "workers", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": worker}},
    }  # fmt: skip
    cluster.apply(as_list(sts))
    for p in ("workers-0", "workers-1"):
        wait_running(cluster, p, ns, timeout=300)
    domain = wait_ready(cluster, "cd", ns, nodes=2)
    uid = domain["metadata"]["uid"]
    leaving = cluster.kubectl_json("get", "pod", "workers-1", "-n", ns)["spec"]["nodeName"]
    staying = next(n["name"] for n in domain["status"]["nodes"] if n["name"] != leaving)
    kept = next(
        d
        for d in domain_daemons(driver.cluster, driver.namespace, uid)
        if d["spec"]["nodeName"] == staying
    )
    kept_ip = kept["status"]["podIP"]
    cluster.wait_until(
        "the daemons list each other",
        lambda: len(_hosts_ips(driver, kept)) == 2,
        timeout=60,
        interval=2,
    )
    cluster.kubectl("cordon", leaving)
    try:
        cluster.kubectl(
            "drain", leaving, "--ignore-daemonsets", "--pod-selector=app=cd-leave",
            "--timeout=120s", timeout=150,
        )  # fmt: skip

        def left() -> bool:
            status = domain_object(cluster, "cd", ns).get("status") or {}
            nodes = [n["name"] for n in status.get("nodes") or []]
            daemons = domain_daemons(driver.cluster, driver.namespace, uid)
            return (
                nodes == [staying]
                and status.get("status") == "NotReady"
                and [d["spec"]["nodeName"] for d in daemons] == [staying]
            )

        cluster.wait_until("the drained node out of the domain", left, timeout=180, interval=2)
        labelled = cluster.kubectl_json("get", "nodes", "-l", f"{LABEL}={uid}")["items"]
        assert [n["metadata"]["name"] for n in labelled] == [staying]
        cluster.wait_until(
            "the remaining daemon forgets its peer",
            lambda: _hosts_ips(driver, kept) == {kept_ip},
            timeout=60,
            interval=2,
        )
        (same,) = domain_daemons(driver.cluster, driver.namespace, uid)
        # The remaining daemon kept running: same pod, not restarted, still Ready.
        assert same["metadata"]["uid"] == kept["metadata"]["uid"]
        assert all(c["restartCount"] == 0 for c in same["status"]["containerStatuses"])
        assert all(c["ready"] for c in same["status"]["containerStatuses"])
        assert "NotReady" in domain_events(cluster, ns, "cd")
    finally:
        cluster.kubectl("uncordon", leaving)
    wait_running(cluster, "workers-1", ns, timeout=300)
    domain = wait_ready(cluster, "cd", ns, nodes=2)
    assert {n["name"] for n in domain["status"]["nodes"]} == {staying, leaving}
    cluster.wait_until(
        "the daemons list each other again",
        lambda: len(_hosts_ips(driver, kept)) == 2,
        timeout=60,
        interval=2,
    )
    cluster.kubectl("delete", "statefulset", "workers", "-n", ns, "--wait=true")
    cluster.kubectl("delete", "computedomain", "cd", "-n", ns, "--wait=false")
    wait_gone(
        cluster,
        "the domain's objects",
        lambda: not domain_leftovers(driver.cluster, driver.namespace, uid),
    )
