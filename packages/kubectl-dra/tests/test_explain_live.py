"""``kubectl-dra explain`` in live mode, against a local HTTP server speaking the API paths.

The console script runs with a kubeconfig pointing at the server, so the real kubernetes
client transport, raw JSON reading and lenient parsing are exercised end to end.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from dra_kube_client.testing import Reply, Request, ScriptedServer, write_kubeconfig

FIXTURES = Path(__file__).parent / "fixtures" / "cli"
SCRIPT = Path(sys.executable).with_name("kubectl-dra")


def _api_objects() -> dict[str, Any]:
    docs = [
        d
        for name in ("cluster.yaml", "held.yaml")
        for d in yaml.safe_load_all((FIXTURES / name).read_text(encoding="utf-8"))
        if d
    ]
    # Newer servers add fields this client does not know: they must be tolerated.
    for doc in docs:
        if doc["kind"] == "ResourceSlice":
            doc["spec"]["someFutureField"] = {"x": 1}
    by_kind: dict[str, list[Any]] = {}
    for doc in docs:
        item = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        by_kind.setdefault(doc["kind"], []).append(item)
    pod = next(d for d in docs if d["kind"] == "Pod")
    return {
        "/apis/resource.k8s.io/v1/deviceclasses": {"items": by_kind["DeviceClass"]},
        "/apis/resource.k8s.io/v1/resourceslices": {"items": by_kind["ResourceSlice"]},
        "/apis/resource.k8s.io/v1/resourceclaims": {
            "items": [*by_kind["ResourceClaim"], MADE_CLAIM]
        },
        "/apis/resource.k8s.io/v1/resourceclaimtemplates": {"items": [ONE_GPU_TEMPLATE]},
        "/api/v1/nodes": {"items": by_kind["Node"]},
        "/api/v1/namespaces/team-a/pods/templated": _templated_pod("templated", "u2"),
        "/api/v1/namespaces/team-a/pods/made": _templated_pod("made", "u3"),
        "/api/v1/namespaces/team-a/pods/trainer": pod,
        "/api/v1/namespaces/team-a/pods/plugin-style": PLUGIN_STYLE_POD,
    }


#: A pending device-plugin style pod, asking through the implicit extended resource name.
PLUGIN_STYLE_POD = {
    "metadata": {"name": "plugin-style", "namespace": "team-a", "uid": "u1"},
    "spec": {
        "containers": [
            {
                "name": "main",
                "resources": {"limits": {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "9"}},
            }
        ]
    },
    "status": {"phase": "Pending"},
}


ONE_GPU_TEMPLATE: dict[str, Any] = {
    "metadata": {"name": "one-gpu", "namespace": "team-a"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        }
    },
}

#: The claim the resourceclaim controller made for pod ``made`` before it updated the pod.
MADE_CLAIM = {
    "metadata": {
        "name": "made-gpu-x7k2q",
        "namespace": "team-a",
        "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "made", "uid": "u3"}],
    },
    "spec": ONE_GPU_TEMPLATE["spec"]["spec"],
}


def _templated_pod(name: str, uid: str) -> dict[str, Any]:
    """A pending pod whose claim comes from ``one-gpu``; its status names no claim yet."""
    return {
        "metadata": {"name": name, "namespace": "team-a", "uid": uid},
        "spec": {
            "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        },
        "status": {"phase": "Pending"},
    }


#: Taints every device of the driver (NoSchedule): explain must say so, as the scheduler would.
TAINT_RULE = {
    "metadata": {"name": "maintenance"},
    "spec": {
        "deviceSelector": {"driver": "gpu.nvidia.com"},
        "taint": {"key": "maintenance", "value": "gpu", "effect": "NoSchedule"},
    },
}


@pytest.fixture
def api_server() -> Iterator[str]:
    """The API without DeviceTaintRules (404 on the collection, as a server without the API)."""
    yield from _serve(_api_objects())


@pytest.fixture
def tainted_api_server() -> Iterator[str]:
    """The API with one DeviceTaintRule, and no claims holding devices (only the taint blocks)."""
    objects = _api_objects()
    claims = objects["/apis/resource.k8s.io/v1/resourceclaims"]["items"]
    objects["/apis/resource.k8s.io/v1/resourceclaims"] = {
        "items": [c for c in claims if not (c.get("status") or {}).get("allocation")]
    }
    objects["/apis/resource.k8s.io/v1/devicetaintrules"] = {"items": [TAINT_RULE]}
    yield from _serve(objects)


def _serve(objects: dict[str, Any]) -> Iterator[str]:
    """The objects by path (GET only; anything else is a 404 Status)."""

    def answer(request: Request) -> Reply:
        body = objects.get(request.path.split("?")[0])
        if request.method != "GET" or body is None:
            return Reply.json(404, {"kind": "Status", "code": 404})
        return Reply.json(200, body)

    with ScriptedServer(answer) as server:
        yield server.url


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", url=server, token="t")


def _explain_live(
    server: str, tmp_path: Path, pod: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl-dra explain pod/<pod> -n team-a [flags]`` against ``server``."""
    env = {"KUBECONFIG": str(_kubeconfig(tmp_path, server)), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [str(SCRIPT), "explain", f"pod/{pod}", "-n", "team-a", *flags],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_explain_pod_live(api_server: str, tmp_path: Path) -> None:
    proc = _explain_live(api_server, tmp_path, "trainer")
    assert proc.returncode == 1, proc.stderr
    assert "ResourceClaim team-a/waiting: pending" in proc.stdout
    assert "held by claim(s) team-b/holder-1 on 2 devices" in proc.stdout


def test_explain_logs_where_its_time_went_at_v1(api_server: str, tmp_path: Path) -> None:
    proc = _explain_live(api_server, tmp_path, "trainer", "-v", "1")
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.splitlines()[-1]
    assert re.fullmatch(
        r"INFO kubectl_dra.cli: explained target=pod/trainer "
        r"fetch_s=\d+\.\d{3} read_s=\d+\.\d{3} explain_s=\d+\.\d{3}",
        last,
    ), last


def test_explain_live_reads_device_taint_rules(tainted_api_server: str, tmp_path: Path) -> None:
    proc = _explain_live(tainted_api_server, tmp_path, "trainer")
    assert proc.returncode == 1, proc.stderr
    assert "tainted maintenance=gpu:NoSchedule, not tolerated" in proc.stdout


def test_explain_live_missing_pod_exit_2(api_server: str, tmp_path: Path) -> None:
    proc = _explain_live(api_server, tmp_path, "nope")
    assert proc.returncode == 2
    assert proc.stderr == "error: Pod team-a/nope: not found\n"


def test_explain_pending_extended_resource_pod_live(api_server: str, tmp_path: Path) -> None:
    proc = _explain_live(api_server, tmp_path, "plugin-style")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "Pod team-a/plugin-style: pending; extended resources:"
    assert "-> DeviceClass gpu.nvidia.com, request container-0-request-0" in lines[1]
    assert "ResourceClaim team-a/plugin-style-extended-resources: pending" in lines
    assert "  fits on no node" in lines
    assert any("needs 9 device(s) of class gpu.nvidia.com" in line for line in lines)


def test_explain_live_template_pod_before_its_claim_is_made(
    api_server: str, tmp_path: Path
) -> None:
    # The controller has not made the claim: explain makes it from the template, says so.
    proc = _explain_live(api_server, tmp_path, "templated")
    assert proc.returncode == 1, proc.stderr  # nothing fits
    assert proc.stdout.splitlines()[:5] == [
        "ResourceClaim team-a/templated-gpu-7qkdw: pending",
        "  fits on no node",
        "  request gpu: needs 1 device(s) of class gpu.nvidia.com; best node node-a has 0 "
        "usable: held by claim(s) team-b/holder-1 on 2 devices (e.g. "
        "gpu.nvidia.com/node-a/gpu-0)",
        "  does not fit on 1 node(s) (node-a):",
        "    - request gpu: needs 1 device(s) of class gpu.nvidia.com, 0 usable",
    ]
    assert proc.stderr == (
        "note: ResourceClaim team-a/templated-gpu-7qkdw: made from ResourceClaimTemplate "
        "team-a/one-gpu for Pod team-a/templated (spec.resourceClaims gpu); the resourceclaim "
        "controller names it templated-gpu-<5 random characters>, here derived from the names\n"
    )


def test_explain_live_template_pod_uses_the_claim_the_controller_made(
    api_server: str, tmp_path: Path
) -> None:
    # Made (owned by the pod, annotated) but not yet in the pod's status: that claim is used.
    proc = _explain_live(api_server, tmp_path, "made")
    assert proc.returncode == 1, proc.stderr  # nothing fits: every GPU is held
    assert proc.stdout.splitlines()[0] == "ResourceClaim team-a/made-gpu-x7k2q: pending"
    assert proc.stderr == ""
