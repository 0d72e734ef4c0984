"""The chart's ValidatingAdmissionPolicies, their CEL run offline over sample requests.

The kubelet plugin's service account may write only its own node's ResourceSlices of this
release's drivers (in every install mode), and may patch only its own Node's labels that the
compute-domain plugin manages. Each policy is rendered by the pinned Helm and evaluated by
``admission_policy`` (allowed and denied requests, with the messages users see); the patches
the plugin's own code sends are run through the Node policy too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from admission_policy import Verdict, review, service_account_request
from chart_helpers import NAMESPACE, HelmFailed, helm_path
from chart_render import render_objects
from dra_computedomain.api_paths import node_path
from dra_computedomain.domain_cache import DomainCache
from dra_computedomain.names import COMPUTE_DOMAIN_LABEL
from dra_computedomain.node_api import NODE_LABELS, NodeApi
from dra_kube_client.testing import MemoryApi

GPU = "gpu.nvidia.com"
CD = "compute-domain.nvidia.com"
NODE = "node-a"
OTHER = "node-b"
#: The install modes: which drivers each one serves.
MODES = {
    "gpus-only": ({"resources.computeDomains.enabled": "false"}, [GPU]),
    "compute-domains-only": (
        {"resources.gpus.enabled": "false", "resources.computeDomains.enabled": "true"},
        [CD],
    ),
    "both": ({"resources.computeDomains.enabled": "true"}, [GPU, CD]),
}

Objects = list[dict[str, Any]]


@pytest.fixture(scope="module")
def render() -> Callable[..., Objects]:
    """Render the chart (pinned Helm) with extra ``--set`` values."""
    try:
        helm = helm_path()
    except HelmFailed as exc:
        pytest.fail(str(exc))

    def _render(sets: dict[str, str]) -> Objects:
        return render_objects(helm, sets)

    return _render


def _policy(objects: Objects, suffix: str) -> dict[str, Any]:
    (policy,) = [
        o
        for o in objects
        if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"].endswith(suffix)
    ]
    (binding,) = [
        o
        for o in objects
        if o["kind"] == "ValidatingAdmissionPolicyBinding"
        and o["spec"]["policyName"] == policy["metadata"]["name"]
    ]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert policy["spec"]["failurePolicy"] == "Fail"
    return policy


def _account(objects: Objects) -> str:
    (sa,) = [
        o["metadata"]["name"]
        for o in objects
        if o["kind"] == "ServiceAccount" and o["metadata"]["name"].endswith("-kubelet-plugin")
    ]
    return str(sa)


def _slice(node: str = NODE, driver: str = GPU) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}-x"},
        "spec": {"driver": driver, "nodeName": node, "pool": {"name": node}},
    }


def _slice_request(objects: Objects, operation: str, node: str | None = NODE) -> dict[str, Any]:
    return service_account_request(
        namespace=NAMESPACE,
        account=_account(objects),
        node=node,
        operation=operation,
        group="resource.k8s.io",
        resource="resourceslices",
    )


def _write_slice(
    objects: Objects,
    operation: str,
    *,
    obj: dict[str, Any] | None,
    old: dict[str, Any] | None,
    node: str | None = NODE,
) -> Verdict:
    policy = _policy(objects, "-resourceslices")
    return review(policy, _slice_request(objects, operation, node), obj=obj, old=old)


# ------------------------------------------------------------------ ResourceSlices


@pytest.mark.parametrize("mode", sorted(MODES))
def test_every_install_mode_confines_slice_writes_to_the_plugins_node(
    render: Callable[..., Objects], mode: str
) -> None:
    sets, drivers = MODES[mode]
    objects = render(sets)
    for driver in drivers:
        own = _slice(driver=driver)
        assert _write_slice(objects, "CREATE", obj=own, old=None).allowed
        assert _write_slice(objects, "UPDATE", obj=own, old=own).allowed
        assert _write_slice(objects, "DELETE", obj=None, old=own).allowed
        other = _slice(OTHER, driver)
        created = _write_slice(objects, "CREATE", obj=other, old=None)
        assert created.denied == (
            f"the kubelet plugin on node '{NODE}' may only write ResourceSlices with "
            f"spec.nodeName '{NODE}', not '{OTHER}'"
        )
        assert not _write_slice(objects, "DELETE", obj=None, old=other).allowed
        assert not _write_slice(objects, "UPDATE", obj=other, old=other).allowed


@pytest.mark.parametrize("mode", sorted(MODES))
def test_slices_of_other_drivers_are_denied(render: Callable[..., Objects], mode: str) -> None:
    sets, drivers = MODES[mode]
    objects = render(sets)
    foreign = [d for d in (GPU, CD, "example.com/other") if d not in drivers]
    for driver in foreign:
        verdict = _write_slice(objects, "CREATE", obj=_slice(driver=driver), old=None)
        assert verdict.denied is not None
        assert f"not '{driver}'" in verdict.denied
        assert ", ".join(drivers) in verdict.denied


def test_an_update_cannot_take_over_another_nodes_slice(render: Callable[..., Objects]) -> None:
    objects = render(MODES["both"][0])
    theirs = _slice(OTHER)
    moved = copy.deepcopy(theirs)
    moved["spec"]["nodeName"] = NODE
    verdict = _write_slice(objects, "UPDATE", obj=moved, old=theirs)
    assert verdict.denied == (
        f"the kubelet plugin on node '{NODE}' may not update a ResourceSlice of node "
        f"'{OTHER}' (spec.nodeName of the existing object)"
    )
    foreign = _slice(driver="example.com/other")
    renamed = copy.deepcopy(foreign)
    renamed["spec"]["driver"] = GPU
    verdict = _write_slice(objects, "UPDATE", obj=renamed, old=foreign)
    assert verdict.denied is not None
    assert "driver 'example.com/other'" in verdict.denied


def test_a_token_without_a_node_writes_no_slice(render: Callable[..., Objects]) -> None:
    objects = render(MODES["compute-domains-only"][0])
    verdict = _write_slice(objects, "CREATE", obj=_slice(driver=CD), old=None, node=None)
    assert verdict.denied is not None
    assert "carry no node name" in verdict.denied


def test_other_accounts_are_not_judged_by_the_slice_policy(
    render: Callable[..., Objects],
) -> None:
    objects = render(MODES["both"][0])
    request = _slice_request(objects, "CREATE")
    request["userInfo"] = {"username": "system:serviceaccount:kube-system:someone-else"}
    policy = _policy(objects, "-resourceslices")
    assert not review(policy, request, obj=_slice(OTHER), old=None).applies


# ------------------------------------------------------------------ Nodes


def _node(labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": NODE, "resourceVersion": "7"}
    if labels is not None:
        meta["labels"] = labels
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"providerID": "kind://node-a"},
        **extra,
    }


def _patch_node(
    objects: Objects, old: dict[str, Any], new: dict[str, Any], *, node: str | None = NODE
) -> Verdict:
    request = service_account_request(
        namespace=NAMESPACE,
        account=_account(objects),
        node=node,
        operation="UPDATE",
        group="",
        resource="nodes",
    )
    return review(_policy(objects, "-nodes"), request, obj=new, old=old)


def test_no_node_policy_and_no_node_patch_without_compute_domains(
    render: Callable[..., Objects],
) -> None:
    objects = render(MODES["gpus-only"][0])
    names = [o["metadata"]["name"] for o in objects if "AdmissionPolicy" in o["kind"]]
    assert not [n for n in names if n.endswith("-nodes")]
    (role,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-kubelet-plugin")
    ]
    assert not [r for r in role["rules"] if "nodes" in r["resources"] and "patch" in r["verbs"]]


@pytest.mark.parametrize(
    ("clique_label", "keys"),
    [("false", {COMPUTE_DOMAIN_LABEL}), ("true", set(NODE_LABELS))],
)
def test_node_policy_allows_exactly_the_plugins_label_keys(
    render: Callable[..., Objects], clique_label: str, keys: set[str]
) -> None:
    sets = {
        "kubeletPlugin.containers.computeDomains.gpuCliqueLabelEnabled": clique_label,
    }
    objects = render(sets)
    managed = next(
        v for v in _policy(objects, "-nodes")["spec"]["variables"] if v["name"] == "managedLabels"
    )
    assert set(json.loads(managed["expression"])) == keys
    old = _node({"kubernetes.io/hostname": NODE})
    for key in NODE_LABELS:
        new = _node({"kubernetes.io/hostname": NODE, key: "v"})
        verdict = _patch_node(objects, old, new)
        if key in keys:
            assert verdict.allowed, verdict.denied
        else:
            assert verdict.denied is not None
            assert f"not metadata.labels {key}" in verdict.denied


def test_the_plugins_own_node_patches_pass(render: Callable[..., Objects]) -> None:
    """The patches ``NodeApi`` sends, applied to a Node, and the result judged by the policy."""
    objects = render({"kubeletPlugin.containers.computeDomains.gpuCliqueLabelEnabled": "true"})
    api = MemoryApi()
    api.put_object(node_path(NODE), _node({"kubernetes.io/hostname": NODE}))
    # Node patches need no domain; an empty cache, listed once, stands in.
    domains = DomainCache(api)
    domains.informer.list_once()
    plugin = NodeApi(api, node_name=NODE, driver_namespace=NAMESPACE, domains=domains)

    def judged(change: Callable[[], None]) -> Verdict:
        before = copy.deepcopy(api.objects[node_path(NODE)])
        change()
        after = api.objects[node_path(NODE)]
        assert after != before, "the patch changed the Node"
        return _patch_node(objects, before, after)

    _, version = plugin.node_label()
    assert judged(lambda: plugin.set_label("domain-uid", version)).allowed
    assert judged(lambda: plugin.set_clique_label("cluster.1")).allowed
    assert judged(lambda: plugin.set_clique_label("")).allowed
    assert judged(lambda: plugin.remove_label("domain-uid")).allowed


def test_another_nodes_labels_are_denied(render: Callable[..., Objects]) -> None:
    objects = render({})
    old = _node({})
    old["metadata"]["name"] = OTHER
    new = copy.deepcopy(old)
    new["metadata"]["labels"][COMPUTE_DOMAIN_LABEL] = "uid"
    verdict = _patch_node(objects, old, new)
    assert verdict.denied == (
        f"the kubelet plugin on node '{NODE}' may only change its own Node, not '{OTHER}'"
    )
    assert not _patch_node(objects, old, new, node=None).allowed


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("metadata.labels node-role.kubernetes.io/control-plane", ("labels", {"x": "y"})),
        ("metadata.labels kubernetes.io/hostname", ("labels", {})),
        ("metadata.annotations", ("annotations", {"a": "b"})),
        ("metadata.ownerReferences", ("ownerReferences", [{"kind": "X", "name": "x"}])),
        ("metadata.finalizers", ("finalizers", ["example.com/keep"])),
        ("spec", ("spec", {"unschedulable": True})),
        ("spec", ("spec", {"taints": [{"key": "k", "effect": "NoSchedule"}]})),
    ],
)
def test_any_other_node_change_is_denied_naming_the_field(
    render: Callable[..., Objects], field: str, change: tuple[str, Any]
) -> None:
    objects = render({})
    old = _node({"kubernetes.io/hostname": NODE})
    new = copy.deepcopy(old)
    where, value = change
    if where == "labels" and value:
        new["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] = ""
    elif where == "labels":
        del new["metadata"]["labels"]["kubernetes.io/hostname"]
    elif where == "spec":
        new["spec"].update(value)
    else:
        new["metadata"][where] = value
    # The plugin's own label in the same patch does not make it pass.
    new["metadata"].setdefault("labels", {})[COMPUTE_DOMAIN_LABEL] = "uid"
    verdict = _patch_node(objects, old, new)
    assert verdict.denied is not None
    assert verdict.denied.endswith(f"of its Node, not {field}"), verdict.denied
    assert f"label(s) {COMPUTE_DOMAIN_LABEL}" in verdict.denied


def test_other_accounts_may_patch_nodes(render: Callable[..., Objects]) -> None:
    objects = render({})
    request = service_account_request(
        namespace=NAMESPACE,
        account="compute-domain-controller",
        node=None,
        operation="UPDATE",
        group="",
        resource="nodes",
    )
    old = _node({})
    new = _node({"anything": "x"})
    assert not review(_policy(objects, "-nodes"), request, obj=new, old=old).applies
