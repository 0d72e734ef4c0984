"""The kubelet plugin's ClusterRole grants exactly the API requests the plugin's code makes.

The requests are read from the plugin's source: every call of its JSON transport
(``.request(METHOD, PATH)``, also through ``asyncio.to_thread``), every ``.watch_lines(PATH)``
and every informer's ``Resource(KIND, API_VERSION, PATH)`` (a list, then a watch), with PATH
resolved from string literals, f-strings and the names assigned to them. A request
that cannot be resolved fails the test, so a new kind of call cannot slip past it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from chart_helpers import REPO
from chart_render import render_objects
from dra_computedomain import node_api

#: The transport itself (``dra_kube_client``) lives outside: its calls go to the HTTP client.
#: The GPU plugin and the core it runs on (registration, claims, slices, events are the core's),
#: and the reviews of secure /metrics the core makes through ``dra_kube_client.delegated_auth``.
PLUGIN_SRCS = (
    REPO / "packages" / "kubelet-plugin" / "src" / "dra_kubelet_plugin",
    REPO / "packages" / "kubelet-core" / "src" / "dra_kubelet_core",
    REPO / "packages" / "kube-client" / "src" / "dra_kube_client" / "delegated_auth.py",
)
METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE"}
#: Resources the plugin asks for in its own namespace only (MPS daemon Deployments), granted
#: by a Role there rather than the ClusterRole.
NAMESPACED = {"deployments", "pods"}


@dataclass(frozen=True)
class Call:
    """One API request in the plugin's source."""

    where: str
    method: str  # an HTTP method, or WATCH
    path: str  # with ``{}`` for formatted parts


def _text(node: ast.expr, names: dict[str, set[str]], where: str) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                parts.append(part.value)
            elif isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name):
                # Only module constants (``_SLICES``) stand for path text; other names are
                # object names or namespaces.
                constant = part.value.id.lstrip("_").isupper()
                known = names.get(part.value.id, set()) if constant else set()
                parts.append(next(iter(known)) if len(known) == 1 else "{}")
            else:
                parts.append("{}")
        return "".join(parts)
    if isinstance(node, ast.Name) and len(names.get(node.id, set())) == 1:
        (value,) = names[node.id]
        return value
    raise AssertionError(f"{where}: cannot resolve the request path {ast.unparse(node)}")


def _string_assignments(tree: ast.Module) -> dict[str, set[str]]:
    """Name -> the string values assigned to it anywhere in the module."""
    names: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        literal = isinstance(value, ast.Constant) and isinstance(value.value, str)
        if literal or isinstance(value, ast.JoinedStr):
            for target in targets:
                if isinstance(target, ast.Name):
                    names.setdefault(target.id, set()).add(_text(value, {}, target.id))
    return names


def plugin_calls() -> Iterator[Call]:
    """Every API request in the plugin's modules."""
    modules = (m for src in PLUGIN_SRCS for m in (src.rglob("*.py") if src.is_dir() else [src]))
    for module in sorted(modules):
        if "_proto" in module.parts:
            continue
        tree = ast.parse(module.read_text(), str(module))
        names = _string_assignments(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            where = f"{module.relative_to(REPO)}:{node.lineno}"
            if isinstance(node.func, ast.Name) and node.func.id == "Resource":
                # dra_kube_client.informers.Resource: the informer lists, then watches, PATH.
                path = node.args[2] if len(node.args) > 2 else None
                path = path or next((k.value for k in node.keywords if k.arg == "path"), None)
                if path is None:
                    raise AssertionError(f"{where}: informer Resource without a path")
                yield Call(where, "GET", _text(path, names, where))
                yield Call(where, "WATCH", _text(path, names, where))
                continue
            if not isinstance(node.func, ast.Attribute):
                continue
            args = list(node.args)
            attr = node.func.attr
            if attr == "to_thread" and args and isinstance(args[0], ast.Attribute):
                attr, args = args[0].attr, args[1:]
            if attr == "watch_lines":
                yield Call(where, "WATCH", _text(args[0], names, where))
            elif attr == "request":
                method = args[0] if args else None
                if not (isinstance(method, ast.Constant) and method.value in METHODS):
                    raise AssertionError(f"{where}: request method is not a literal")
                yield Call(where, str(method.value), _text(args[1], names, where))


def is_discovery(call: Call) -> bool:
    """``GET /apis/<group>[/<version>]`` or ``GET /version``: a discovery URL, which every
    authenticated client may read (``system:discovery``, ``system:public-info-viewer``), so
    no rule grants it."""
    segments = call.path.split("?")[0].strip("/").split("/")
    if call.method == "GET" and segments == ["version"]:
        return True
    return call.method == "GET" and segments[0] == "apis" and len(segments) in (2, 3)


def resource_calls() -> Iterator[Call]:
    """The plugin's requests of API resources (discovery left out)."""
    return (c for c in plugin_calls() if not is_discovery(c))


def verb_of(call: Call) -> tuple[str, str, str]:
    """``(api group, resource, verb)`` the API server authorizes the call as."""
    segments = call.path.split("?")[0].strip("/").split("/")
    if segments[0] == "api":
        group, rest = "", segments[2:]
    elif segments[0] == "apis":
        group, rest = segments[1], segments[3:]
    else:
        raise AssertionError(f"{call.where}: {call.path} is not an API resource path")
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    resource, item = rest[0], len(rest) > 1
    verbs = {
        ("GET", True): "get",
        ("GET", False): "list",
        ("WATCH", False): "watch",
        ("POST", False): "create",
        ("PUT", True): "update",
        ("PATCH", True): "patch",
        ("DELETE", True): "delete",
        ("DELETE", False): "deletecollection",
    }
    verb = verbs.get((call.method, item))
    assert verb, f"{call.where}: {call.method} {call.path} maps to no verb"
    return group, resource, verb


def _granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_scan_finds_the_plugins_requests() -> None:
    used = {verb_of(c) for c in resource_calls()}
    assert any(c.path == "/apis/resource.k8s.io" for c in plugin_calls() if is_discovery(c))
    assert any(c.path == "/version" for c in plugin_calls() if is_discovery(c))
    # What the plugin is known to do; if one disappears the scan lost track of the code.
    assert ("resource.k8s.io", "resourceslices", "create") in used
    assert ("resource.k8s.io", "resourceslices", "watch") in used
    assert ("resource.k8s.io", "resourceclaims", "get") in used
    assert ("", "nodes", "get") in used


@pytest.mark.parametrize("compute_domains", [True, False])
def test_cluster_role_grants_exactly_what_the_plugin_calls(
    helm: Path, compute_domains: bool
) -> None:
    used = {verb_of(c) for c in resource_calls()}
    if compute_domains:
        # The compute-domain container shares the pod's service account; its requests are
        # declared next to its code and checked against what it does by its unit tests.
        used |= node_api.REQUESTS
    objects = render_objects(
        helm, {"resources.computeDomains.enabled": str(compute_domains).lower()}
    )
    (role,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRole" and o["metadata"]["name"].endswith("-kubelet-plugin")
    ]
    # MPS daemon Deployments and their pods live in the driver's namespace: a Role grants them.
    namespaced = {v for v in used if v[1] in NAMESPACED}
    granted = _granted(role)
    assert granted == used - namespaced, (
        f"granted but never used: {sorted(granted - used)}; "
        f"used but not granted: {sorted(used - namespaced - granted)}"
    )
    # The compute-domain components have roles of their own (test_chart_rbac_computedomain);
    # the plugin's service account is bound to one Role only: the MPS daemons', in its namespace.
    plugin_sa = next(
        o
        for o in objects
        if o["kind"] == "ServiceAccount" and o["metadata"]["name"].endswith("-kubelet-plugin")
    )
    (binding,) = [
        o
        for o in objects
        if o["kind"] == "RoleBinding"
        and any(s["name"] == plugin_sa["metadata"]["name"] for s in o["subjects"])
    ]
    assert binding["metadata"]["namespace"] == plugin_sa["metadata"]["namespace"]
    (mps_role,) = [
        o
        for o in objects
        if o["kind"] == "Role" and o["metadata"]["name"] == binding["roleRef"]["name"]
    ]
    assert mps_role["metadata"]["namespace"] == plugin_sa["metadata"]["namespace"]
    assert _granted(mps_role) == namespaced
