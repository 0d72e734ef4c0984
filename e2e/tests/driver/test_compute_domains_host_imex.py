"""Host-managed IMEX (NVIDIA's ``resources.computeDomains.imex.mode=hostManaged``) on a fake
GB200 node: the node's "host service" is the IMEX stand-in serving a Unix command socket on
this machine (``hostSocketPath``); the chart runs no domain daemons and a channel prepare waits
for the host daemon's READY.

One chart install for the module, on the session's cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dra_computedomain.fake_host_imex import HostImexProcess, start_host_imex
from dra_e2e.handle import ClusterHandle
from driver_support import (
    Driver,
    dump_diagnostics,
    exists,
    forget_fake_fleet,
    install,
    uninstall,
    wait_gone,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CD_DRIVER = "compute-domain.nvidia.com"
LABEL = "resource.nvidia.com/computeDomain"


@pytest.fixture(scope="module")
def host_imex() -> Iterator[HostImexProcess]:
    """The nodes' host IMEX stand-in, not started yet (the tests start it)."""
    with start_host_imex(started=False) as host:
        yield host


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, host_imex: HostImexProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart in host-managed IMEX mode on fake GB200 GPUs (the nodes' fake fleet is
    forgotten before and after: the session's cluster has served other fleets)."""
    forget_fake_fleet(e2e_cluster)
    installed = install(
        e2e_cluster,
        tmp_path_factory.mktemp("cd-host-images"),
        {
            "devices.fakeGpus": "{4xGB200}",
            "resources.computeDomains.enabled": "true",
            "resources.computeDomains.imex.mode": "hostManaged",
            "resources.computeDomains.imex.hostSocketPath": str(host_imex.socket),
            "featureGates.HostManagedIMEXDaemon": "true",
        },
    )
    yield installed
    uninstall(installed)
    if installed.installed_here:
        wait_gone(installed.cluster, "kubelet plugin pods", lambda: not installed.plugin_pods())
        forget_fake_fleet(e2e_cluster)


def _events(cluster: ClusterHandle, ns: str, name: str) -> str:
    return cluster.kubectl(
        "get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}",
        "-o", "custom-columns=R:.reason,M:.message", "--no-headers",
    )  # fmt: skip


def test_channels_wait_for_the_host_imex_and_no_daemon_runs(
    driver: Driver, host_imex: HostImexProcess, e2e_namespace: str
) -> None:
    try:
        _scenario(driver, host_imex, e2e_namespace)
    except Exception:
        print(dump_diagnostics(driver))
        raise


def _scenario(driver: Driver, host_imex: HostImexProcess, ns: str) -> None:
    import json

    cluster = driver.cluster

    # Only channel-0 is published: there are no daemon slots without driver-managed IMEX.
    def cd_slices() -> list[dict[str, Any]]:
        items = cluster.kubectl_json("get", "resourceslices")["items"]
        return [s for s in items if s["spec"]["driver"] == CD_DRIVER]

    cluster.wait_until("the compute-domain slice", lambda: bool(cd_slices()), timeout=120)
    slices = cd_slices()
    for s in slices:
        assert [d["name"] for d in s["spec"]["devices"]] == ["channel-0"]
    domain = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "cd", "namespace": ns},
        "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "cd-channel"}}},
    }
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", "namespace": ns},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "ctr", "image": "ubuntu:22.04", "command": ["bash", "-c"],
                "args": ["ls /dev/nvidia-caps-imex-channels; trap 'exit 0' TERM; "
                         "sleep 9999 & wait"],
                "resources": {"claims": [{"name": "channel"}]},
            }],
            "resourceClaims": [{"name": "channel", "resourceClaimTemplateName": "cd-channel"}],
        },
    }  # fmt: skip
    cluster.apply(json.dumps(domain))
    cluster.wait_until(
        "the workload template",
        lambda: exists(cluster, "resourceclaimtemplate", "cd-channel", "-n", ns),
        timeout=120,
        interval=2,
    )
    cd = cluster.kubectl_json("get", "computedomain", "cd", "-n", ns)
    uid = cd["metadata"]["uid"]
    cluster.apply(json.dumps(pod))
    # The host's nvidia-imex is down: the prepare is refused (retried), naming the socket.
    cluster.wait_until(
        "the prepare waiting for the host IMEX",
        lambda: "not reachable or not READY" in _events(cluster, ns, "w"),
        timeout=180,
        interval=3,
    )
    phase = cluster.kubectl_json("get", "pod", "w", "-n", ns)["status"]["phase"]
    assert phase == "Pending"
    host_imex.start()
    cluster.wait_until(
        "the worker Running",
        lambda: cluster.kubectl_json("get", "pod", "w", "-n", ns)["status"]["phase"] == "Running",
        timeout=240,
        interval=3,
    )
    assert "channel0" in cluster.kubectl("logs", "w", "-n", ns).split()
    # No domain daemons, no daemon template, no node label; the domain is Ready.
    found = cluster.kubectl_json("get", "daemonsets,pods", "-n", driver.namespace, "-l", LABEL)
    assert found["items"] == []
    assert not cluster.kubectl_json("get", "nodes", "-l", LABEL)["items"]
    templates = cluster.kubectl_json("get", "resourceclaimtemplates", "-A", "-l", f"{LABEL}={uid}")
    assert [t["metadata"]["name"] for t in templates["items"]] == ["cd-channel"]
    cluster.wait_until(
        "the domain Ready",
        lambda: (cluster.kubectl_json("get", "computedomain", "cd", "-n", ns).get("status") or {})
        .get("status") == "Ready",
        timeout=60,
        interval=2,
    )  # fmt: skip
    cluster.kubectl("delete", "pod", "w", "-n", ns, "--wait=true", timeout=120)
    cluster.kubectl("delete", "computedomain", "cd", "-n", ns, "--wait=false")
    wait_gone(cluster, "the domain", lambda: not exists(cluster, "computedomain", "cd", "-n", ns))
    assert not cluster.kubectl_json("get", "resourceclaimtemplates", "-A", "-l", f"{LABEL}={uid}")[
        "items"
    ]
