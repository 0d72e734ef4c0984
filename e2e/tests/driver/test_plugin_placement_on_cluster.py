"""The kubelet plugin scheduled on no node, on the harness (issue #26, item 4).

The chart is installed with a short ``allocationController.placementGracePeriod``, then
upgraded with a ``kubeletPlugin.nodeSelector`` that no node carries: its DaemonSet wants no
pod, yet ``helm --wait`` succeeds. Helm's NOTES say that no node matches, and once the
DaemonSet has wanted no pod for the grace period, the allocation controller posts a
``KubeletPluginUnscheduled`` Warning Event on it naming the selector (the plugin, not running,
cannot warn itself), once: the checks that follow do not post it again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dra_e2e.handle import ClusterHandle
from driver_support import Driver, events_for, json_log_lines, own_install
from upgrade_support import upgrade_reusing_values

# driver_diagnostics: conftest.py.
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("driver_diagnostics")]

REASON = "KubeletPluginUnscheduled"
GRACE_S = 5
#: A node label no node of the harness carries.
LABEL, NOWHERE = "dra-e2e-placement", "nowhere"
VALUES = {
    "allocationController.placementGracePeriod": str(GRACE_S),
    # The placement check runs every resync period.
    "allocationController.resyncPeriod": "2",
}
PLUGIN = "app.kubernetes.io/component=kubelet-plugin"
CONTROLLER = "app.kubernetes.io/component=allocation-controller"
#: The controller's log events: a placement check that found the DaemonSet on no node, and the
#: Event's post.
FOUND, POSTED = "kubelet_plugin_unscheduled", "kubelet_plugin_unscheduled_event_posted"


@pytest.fixture(scope="module")
def driver(
    e2e_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Driver]:
    """The chart on fake GPUs with a short placement grace period (one install for the
    module, which the test then moves off every node)."""
    workdir = tmp_path_factory.mktemp("placement-images")
    needs = "a short placement grace period"
    with own_install(e2e_cluster, workdir, VALUES, needs=needs) as installed:
        yield installed


def _unscheduled(driver: Driver, daemonset: str) -> list[str]:
    events = events_for(driver.cluster, "DaemonSet", daemonset, driver.namespace)
    return [e for e in events if e.startswith(f"{REASON}: ")]


def _checks_since_posted(driver: Driver) -> int:
    """How many placement checks found the DaemonSet on no node after the Event was posted."""
    args = ["logs", "-n", driver.namespace, "-l", CONTROLLER, "--tail=-1"]
    kinds = [line.get("event") for line in json_log_lines(driver.cluster.kubectl(*args))]
    return kinds[kinds.index(POSTED) + 1 :].count(FOUND) if POSTED in kinds else 0


def test_a_plugin_on_no_node_is_named_in_the_notes_and_by_an_event(driver: Driver) -> None:
    cluster, namespace = driver.cluster, driver.namespace
    nodes = len(cluster.node_names())
    placed = f"Kubelet plugin placement: {nodes} of the cluster's {nodes} nodes match"
    assert placed in driver.install_output
    (daemonset,) = cluster.kubectl_json("get", "daemonsets", "-n", namespace, "-l", PLUGIN)["items"]
    name = daemonset["metadata"]["name"]
    # Scheduled on every node since the install: no warning.
    assert _unscheduled(driver, name) == []

    notes = upgrade_reusing_values(
        driver, {f"kubeletPlugin.nodeSelector.{LABEL}": NOWHERE}, timeout="3m"
    )
    assert f"WARNING: none of the cluster's {nodes} nodes matches the kubelet plugin's" in notes
    assert "so its DaemonSet runs no pod (`rollout status` still succeeds)" in notes

    def wants_no_pod() -> bool:
        status = cluster.kubectl_json("get", "daemonset", name, "-n", namespace)["status"]
        return bool(status.get("desiredNumberScheduled", 0) == 0)

    cluster.wait_until(f"DaemonSet {name} to want no pod", wants_no_pod, timeout=60)

    try:
        (event,) = cluster.wait_until(
            f"{REASON} on DaemonSet {namespace}/{name}",
            lambda: _unscheduled(driver, name),
            timeout=90,
            interval=2,
        )
    except Exception:
        print(cluster.kubectl("logs", "-n", namespace, "-l", CONTROLLER, "--tail=40"))
        raise
    assert f"DaemonSet {namespace}/{name} is scheduled on no node" in event
    assert f'"nodeSelector":{{"{LABEL}":"{NOWHERE}"' in event
    assert "kubeletPlugin.affinity (null: every node) and kubeletPlugin.nodeSelector" in event
    # Not posted again by the checks that follow: once two have logged their finding, the first
    # of them has finished deciding (a check logs its finding, then posts or not).
    cluster.wait_until(
        "two placement checks after the Event",
        lambda: _checks_since_posted(driver) >= 2,
        timeout=60,
        interval=2,
    )
    (warning,) = [
        e
        for e in cluster.kubectl_json("get", "events", "-n", namespace)["items"]
        if e.get("reason") == REASON
    ]
    assert warning["type"] == "Warning"
    assert warning["involvedObject"]["uid"] == daemonset["metadata"]["uid"]
