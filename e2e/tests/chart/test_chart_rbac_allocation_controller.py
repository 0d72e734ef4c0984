"""The allocation controller's roles grant exactly the API requests its code makes.

Its requests are the informers' list and watch of every collection it caches
(``dra_kube_client.informers.ALL_RESOURCES``) and the literal ``.request(METHOD, PATH)``
calls of ``dra_controller.allocation_controller`` (Events) and of the Lease elector it runs
(``dra_kube_client.leader``) and the reviews of secure ``/metrics``
(``dra_kube_client.delegated_auth``), read from the source as the kubelet plugin's test does.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from chart_helpers import REPO
from chart_render import render_objects
from dra_kube_client.informers import ALL_RESOURCES
from test_chart_rbac import METHODS, Call, _granted, _string_assignments, _text, verb_of

CONTROLLER_SRC = (
    REPO / "packages" / "controller" / "src" / "dra_controller" / "allocation_controller"
)
LEADER_SRC = REPO / "packages" / "kube-client" / "src" / "dra_kube_client" / "leader.py"
#: The TokenReview and SubjectAccessReview of secure /metrics.
AUTH_SRC = REPO / "packages" / "kube-client" / "src" / "dra_kube_client" / "delegated_auth.py"


def controller_calls() -> Iterator[Call]:
    """The informers' lists and watches, and every literal request of the controller."""
    for resource in ALL_RESOURCES:
        yield Call(f"informer {resource.kind}", "GET", resource.path)
        yield Call(f"informer {resource.kind}", "WATCH", resource.path)
    for module in [*sorted(CONTROLLER_SRC.rglob("*.py")), LEADER_SRC, AUTH_SRC]:
        tree = ast.parse(module.read_text(), str(module))
        names = _string_assignments(tree)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "request"
            ):
                continue
            where = f"{module.relative_to(REPO)}:{node.lineno}"
            method = node.args[0] if node.args else None
            if not (isinstance(method, ast.Constant) and method.value in METHODS):
                raise AssertionError(f"{where}: request method is not a literal")
            yield Call(where, str(method.value), _text(node.args[1], names, where))


def test_the_scan_finds_the_controllers_requests() -> None:
    used = {verb_of(c) for c in controller_calls()}
    assert ("", "events", "create") in used
    assert ("coordination.k8s.io", "leases", "update") in used
    assert ("resource.k8s.io", "resourceclaims", "watch") in used


def test_roles_grant_exactly_what_the_controller_calls(helm: Path) -> None:
    used = {verb_of(c) for c in controller_calls()}
    objects = render_objects(helm)
    mine = [
        o
        for o in objects
        if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/component")
        == "allocation-controller"
    ]
    (cluster_role,) = [o for o in mine if o["kind"] == "ClusterRole"]
    (role,) = [o for o in mine if o["kind"] == "Role"]
    leases = {v for v in used if v[1] == "leases"}
    assert _granted(role) == leases
    assert _granted(cluster_role) == used - leases, (
        f"granted but never used: {sorted(_granted(cluster_role) - used)}; "
        f"used but not granted: {sorted(used - leases - _granted(cluster_role))}"
    )
    (binding,) = [o for o in mine if o["kind"] == "RoleBinding"]
    assert binding["metadata"]["namespace"] == role["metadata"]["namespace"]


def test_disabled_controller_renders_nothing_of_it(helm: Path) -> None:
    objects = render_objects(helm, {"allocationController.enabled": "false"})
    names = [o["metadata"]["name"] for o in objects]
    assert not [n for n in names if "allocation-controller" in n]


def test_no_lease_role_without_leader_election(helm: Path) -> None:
    objects = render_objects(helm, {"allocationController.leaderElection.enabled": "false"})
    deployment = next(
        o for o in objects if o["kind"] == "Deployment" and "allocation" in o["metadata"]["name"]
    )
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-elect=false" in args
    assert not [
        o
        for o in objects
        if o["kind"] == "Role" and "allocation-controller" in o["metadata"]["name"]
    ]


def test_the_controller_watches_the_plugin_daemonset_it_may_read(helm: Path) -> None:
    objects = render_objects(helm, namespace="gpu-system")
    (plugin,) = [o for o in objects if o["kind"] == "DaemonSet"]
    deployment = next(
        o for o in objects if o["kind"] == "Deployment" and "allocation" in o["metadata"]["name"]
    )
    env = {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    name = plugin["metadata"]["name"]
    assert env["KUBELET_PLUGIN_DAEMONSETS"] == f"{plugin['metadata']['namespace']}/{name}"
    (cluster_role,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRole" and "allocation-controller" in o["metadata"]["name"]
    ]
    (rule,) = [r for r in cluster_role["rules"] if "daemonsets" in r["resources"]]
    assert rule == {
        "apiGroups": ["apps"],
        "resources": ["daemonsets"],
        "resourceNames": [name],
        "verbs": ["get"],
    }
