"""The kubelet plugin's DaemonSet scheduled on no node: warned after the grace period."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from controller_objects import stores
from dra_controller.allocation_controller import AllocationController, ControllerMetrics
from dra_controller.allocation_controller.cli import parse_daemonsets
from dra_controller.allocation_controller.events import EventPublisher
from dra_controller.allocation_controller.plugin_placement import (
    REASON,
    PlacementChecker,
    PlacementWatch,
    placement_of,
)
from dra_kube_client.testing import MemoryApi

NS, NAME = "gpu", "dra-kubelet-plugin"
PATH = f"/apis/apps/v1/namespaces/{NS}/daemonsets/{NAME}"
AFFINITY = {
    "requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "In"}]}
        ]
    }
}


def daemonset(desired: int, *, generation: int = 1, observed: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": NS, "uid": "ds-1", "generation": generation},
        "spec": {
            "template": {
                "spec": {"nodeSelector": {"pool": "gpu"}, "affinity": {"nodeAffinity": AFFINITY}}
            }
        },
        "status": {"desiredNumberScheduled": desired, "observedGeneration": observed},
    }


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def checker(api: MemoryApi, clock: Clock) -> PlacementChecker:
    publisher = EventPublisher(api, instance="ctrl-0", clock=clock)
    return PlacementChecker(
        api, [(NS, NAME)], watch=PlacementWatch(grace_s=300), publisher=publisher, clock=clock
    )


def events(api: MemoryApi) -> list[dict[str, Any]]:
    return api.kind_items("events")


def test_no_warning_within_the_grace_period_then_one_event_naming_the_selector(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, clock = MemoryApi(), Clock()
    api.put_object(PATH, daemonset(0))
    check = checker(api, clock)
    assert check.check() == []
    clock.now += 299
    assert check.check() == []
    assert events(api) == []
    clock.now += 1
    with caplog.at_level(logging.INFO):
        (found,) = check.check()
    assert found.for_s == 300
    # The Event's own log line says what it is about, never a claim.
    posted = {r.__dict__.get("event") for r in caplog.records if r.levelno == logging.INFO}
    assert "kubelet_plugin_unscheduled_event_posted" in posted
    assert "claim_unsatisfiable" not in posted
    (event,) = events(api)
    assert event["reason"] == REASON
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "DaemonSet"
    assert event["involvedObject"]["name"] == NAME
    assert event["involvedObject"]["namespace"] == NS
    assert f"DaemonSet {NS}/{NAME} is scheduled on no node" in event["message"]
    assert '"nodeSelector":{"pool":"gpu"}' in event["message"]
    assert "nvidia.com/gpu.present" in event["message"]
    assert "kubeletPlugin.affinity" in event["message"]
    record = next(
        r for r in caplog.records if r.__dict__.get("event") == "kubelet_plugin_unscheduled"
    )
    assert record.__dict__["object"] == f"{NS}/{NAME}"
    assert "pool" in record.__dict__["selector"]


def test_the_same_warning_is_not_posted_again_at_every_check() -> None:
    api, clock = MemoryApi(), Clock()
    api.put_object(PATH, daemonset(0))
    check = checker(api, clock)
    check.check()
    clock.now += 400
    assert len(check.check()) == 1
    clock.now += 30
    assert len(check.check()) == 1
    assert len(events(api)) == 1


def test_the_controllers_reconciles_between_checks_do_not_repost_the_warning() -> None:
    # One publisher for both posters, as the command wires them: each reconcile forgets the
    # pods and claims no longer of interest, which the DaemonSet never is. Forgetting it too
    # posted the same Event again at every check (one every resync period).
    api, clock = MemoryApi(), Clock()
    api.put_object(PATH, daemonset(0))
    publisher = EventPublisher(api, instance="ctrl-0", clock=clock)
    check = PlacementChecker(
        api, [(NS, NAME)], watch=PlacementWatch(grace_s=0), publisher=publisher, clock=clock
    )
    controller = AllocationController(
        stores([]), metrics=ControllerMetrics(), publisher=publisher, clock=clock
    )
    assert len(check.check()) == 1
    for _ in range(3):
        controller.reconcile()
        clock.now += 30
        assert len(check.check()) == 1
    assert len(events(api)) == 1


def test_a_scheduled_daemonset_resets_the_grace_period() -> None:
    watch = PlacementWatch(grace_s=60)
    assert watch.observe(daemonset(0), 0.0) is None
    assert watch.observe(daemonset(2), 50.0) is None
    assert watch.observe(daemonset(0), 70.0) is None
    assert watch.observe(daemonset(0), 129.0) is None
    found = watch.observe(daemonset(0), 130.0)
    assert found is not None
    assert found.for_s == 60


def test_a_status_not_yet_observed_is_not_judged() -> None:
    watch = PlacementWatch(grace_s=0)
    assert watch.observe(daemonset(0, generation=2, observed=1), 0.0) is None
    assert watch.observe(daemonset(0, generation=2, observed=2), 0.0) is not None


def test_an_unreadable_daemonset_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    api, clock = MemoryApi(), Clock()
    check = checker(api, clock)
    with caplog.at_level(logging.WARNING):
        assert check.check() == []
    assert any(r.__dict__.get("event") == "daemonset_unreadable" for r in caplog.records)
    assert events(api) == []


def test_without_a_publisher_it_only_logs() -> None:
    api, clock = MemoryApi(), Clock()
    api.put_object(PATH, daemonset(0))
    check = PlacementChecker(
        api, [(NS, NAME)], watch=PlacementWatch(grace_s=0), publisher=None, clock=clock
    )
    assert len(check.check()) == 1
    assert events(api) == []


def test_placement_of_a_daemonset_without_selector_or_affinity_is_empty() -> None:
    bare: dict[str, Any] = {"spec": {"template": {"spec": {}}}}
    assert placement_of(bare) == "{}"


def test_run_checks_only_while_leading() -> None:
    api, clock = MemoryApi(), Clock()
    api.put_object(PATH, daemonset(0))
    check = checker(api, clock)
    stop = threading.Event()
    answers = iter([False, False, True])

    def is_leader() -> bool:
        leading = next(answers)
        if leading:
            stop.set()  # the loop ends after this, the only leading, pass
        return leading

    check.run(stop, every_s=0.001, is_leader=is_leader)
    assert api.requests.count(("GET", PATH)) == 1


def test_the_daemonsets_flag_parses_namespace_and_name() -> None:
    assert parse_daemonsets("gpu/plugin, cd/other,") == [("gpu", "plugin"), ("cd", "other")]
    assert parse_daemonsets("") == []
    for bad in ("plugin", "/plugin", "gpu/", "a/b/c"):
        with pytest.raises(ValueError, match="--kubelet-plugin-daemonsets"):
            parse_daemonsets(bad)
