"""``dra-allocation-controller`` as a process against a local stand-in API server.

The console script loads a kubeconfig, lists and watches every collection, takes the
Lease, serves /readyz and /metrics, and posts the DRAUnsatisfiable Events.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controller_objects import GPU_CLASS, claim, gpu, node, pod, slice_
from dra_kube_client.testing import Reply, Request, ScriptedServer, free_port

SCRIPT = Path(sys.executable).with_name("dra-allocation-controller")
MEM_40 = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"
LISTS = {
    "/apis/resource.k8s.io/v1/deviceclasses": [GPU_CLASS],
    "/apis/resource.k8s.io/v1/resourceslices": [slice_("n1", [gpu("gpu-0", "16Gi")])],
    "/apis/resource.k8s.io/v1/resourceclaims": [claim("big", selector=MEM_40)],
    "/api/v1/pods": [pod("trainer", "big")],
    "/api/v1/nodes": [node("n1")],
}


@pytest.fixture
def api() -> Iterator[tuple[str, dict[str, Any]]]:
    """Lists, idle watches, a Lease store and an Event sink."""
    state: dict[str, Any] = {"leases": {}, "events": []}

    def answer(request: Request) -> Reply:
        path, _, query = request.path.partition("?")
        if request.method == "GET":
            if "watch=true" in query:
                time.sleep(0.5)  # an idle watch the server ends
                return Reply(200, b"")
            if path in LISTS:
                return Reply.json(200, {"items": LISTS[path], "metadata": {"resourceVersion": "5"}})
            if path in state["leases"]:
                return Reply.json(200, state["leases"][path])
            return Reply.status_error(404, "not found")
        body = json.loads(request.body)
        if request.method == "PUT":
            state["leases"][path] = body
            return Reply.json(200, body)
        if path.endswith("/leases"):
            body["metadata"]["resourceVersion"] = "1"
            state["leases"][f"{path}/{body['metadata']['name']}"] = body
        else:
            state["events"].append(body)
        return Reply.json(201, body)

    with ScriptedServer(answer) as server:
        yield server.url, state


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        with err:
            return err.code, ""
    except OSError:
        return 0, ""


def _until(check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError("timed out")


def test_the_console_script_serves_metrics_takes_the_lease_and_posts_events(
    api: tuple[str, dict[str, Any]], tmp_path: Path
) -> None:
    url, state = api
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "t",
                "clusters": [{"name": "t", "cluster": {"server": url}}],
                "users": [{"name": "t", "user": {"token": "x"}}],
                "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}],
            }
        )
    )
    port = free_port()
    proc = subprocess.Popen(
        [str(SCRIPT), f"--kubeconfig={kubeconfig}", f"--http-address=127.0.0.1:{port}",
         "--lease-namespace=ns", "--identity=ctl-0", "--metrics-insecure=true"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            _until(lambda: _get(f"{base}/readyz")[0] == 200)
        except AssertionError:
            proc.terminate()
            raise AssertionError(proc.communicate(timeout=30)[1][-3000:]) from None
        text = _until(
            lambda: (
                (m := _get(f"{base}/metrics")[1])
                and "dra_allocation_controller_leader 1.0" in m
                and m
            )
        )
        pending = 'name="big",namespace="team",resource_class="gpu.nvidia.com"'
        assert f"kube_resourceclaim_pending{{{pending}}} 1.0" in text
        lease = state["leases"][
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/dra-allocation-controller"
        ]
        assert lease["spec"]["holderIdentity"] == "ctl-0"
        events = _until(lambda: [e for e in state["events"] if e["reason"] == "DRAUnsatisfiable"])
        kinds = sorted(
            e["involvedObject"]["kind"] for e in _until(lambda: len(events) >= 2 and events, 30)
        )
        assert kinds == ["Pod", "ResourceClaim"]
        assert "memory >= 40Gi: best node n1 has 16Gi" in events[0]["message"]
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(line.get("event") == "claim_unsatisfiable" for line in lines)
