"""The compute-domain controller's and daemons' roles grant exactly what their code declares.

Each component declares its API permissions next to its code (``CLUSTER_REQUESTS`` and
``NAMESPACE_REQUESTS`` of ``dra_computedomain.controller``, ``REQUESTS`` of
``dra_computedomain.daemon``); the package's unit tests check every request the components make
against those declarations, and this test checks the chart against them.
"""

from __future__ import annotations

from typing import Any

import pytest
from chart_helpers import HelmFailed, helm_path
from chart_render import render_objects
from dra_computedomain import controller, daemon
from dra_computedomain.controller_cli import build_parser, lease_lock


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    """The chart with compute domains enabled, fake backend."""
    try:
        helm = helm_path()
    except HelmFailed as exc:
        pytest.fail(str(exc))
    return render_objects(
        helm, {"resources.computeDomains.enabled": "true", "devices.backend": "fake"}
    )


def _one(objects: list[dict[str, Any]], kind: str, suffix: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    return found


def _granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_controller_roles_match_its_declared_requests(objects: list[dict[str, Any]]) -> None:
    cluster = _one(objects, "ClusterRole", "-compute-domain-controller")
    namespaced = _one(objects, "Role", "-compute-domain-controller")
    assert _granted(cluster) == controller.CLUSTER_REQUESTS
    assert _granted(namespaced) == controller.NAMESPACE_REQUESTS
    deployment = _one(objects, "Deployment", "-compute-domain-controller")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == cluster["metadata"]["name"]
    assert pod["containers"][0]["command"] == ["dra-compute-domain-controller"]
    assert "--imex-backend=fake" in pod["containers"][0]["args"]


def test_daemon_role_matches_its_declared_requests(objects: list[dict[str, Any]]) -> None:
    role = _one(objects, "Role", "-compute-domain-daemon")
    assert _granted(role) == daemon.REQUESTS
    binding = _one(objects, "RoleBinding", "-compute-domain-daemon")
    assert binding["subjects"][0]["name"] == "compute-domain-daemon-service-account"
    _one(objects, "ServiceAccount", "compute-domain-daemon-service-account")


def test_nothing_of_compute_domains_without_them() -> None:
    try:
        helm = helm_path()
    except HelmFailed as exc:
        pytest.fail(str(exc))
    rendered = render_objects(helm, {"resources.computeDomains.enabled": "false"})
    assert not [o for o in rendered if "compute-domain" in o["metadata"]["name"]]


def test_two_replicas_compete_for_nvidias_lease_in_the_release_namespace() -> None:
    # NVIDIA's chart: LEADER_ELECTION_LEASE_LOCK_NAME=<chart name>-controller in the release's
    # namespace; its leader-election test looks the holder up on that Lease.
    sets = {
        "resources.computeDomains.enabled": "true",
        "controller.replicas": "2",
        "controller.leaderElection.enabled": "true",
    }
    deployment = _one(render_objects(helm_path(), sets), "Deployment", "-compute-domain-controller")
    assert deployment["spec"]["replicas"] == 2
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args([a.replace("$(POD_NAMESPACE)", "driver-ns") for a in args])
    assert parsed.leader_election
    assert parsed.verbosity == 4
    assert lease_lock(parsed) == ("driver-ns", "dra-driver-nvidia-gpu-controller")
