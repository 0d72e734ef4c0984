"""``kubectl dra explain`` says the gap in one plain line per request before the CEL proof,
exits 1 when nothing fits, names where a missing name exists, and fails in one line when the
cluster cannot be reached (issue #24, item 4)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dra_kube_client.testing import Reply, Request, ScriptedServer, free_port, write_kubeconfig

FIXTURES = Path(__file__).parent / "fixtures" / "cli"
SCRIPT = Path(sys.executable).with_name("kubectl-dra")

SELECTOR_400 = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('400Gi')) >= 0"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The console script in the fixture directory."""
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=FIXTURES,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_unsatisfiable_selector_gap_first_then_cel_detail_exit_1() -> None:
    proc = run(
        "explain", "resourceclaim/big", "-n", "team-a", "-f", "cluster.yaml",
        "-f", "too-much-memory.yaml",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr == ""
    detail = (
        "        request selector #0 is false on 2 devices (e.g. gpu.nvidia.com/{node}/gpu-0: "
        f"{SELECTOR_400} is false (device.capacity['gpu.nvidia.com'].memory.compareTo("
        "quantity('400Gi')) = -1, device.capacity['gpu.nvidia.com'].memory = "
        'quantity("{mem}")))'
    )
    assert proc.stdout.splitlines() == [
        "ResourceClaim team-a/big: pending",
        "  fits on no node",
        "  request gpu: memory >= 400Gi: best device node-b/gpu-0 has 80Gi",
        "  does not fit on 1 node(s) (node-a):",
        "    - request gpu: needs 1 device(s) of class gpu.nvidia.com, 0 usable",
        detail.format(node="node-a", mem="40Gi"),
        "  does not fit on 1 node(s) (node-b):",
        "    - request gpu: needs 1 device(s) of class gpu.nvidia.com, 0 usable",
        detail.format(node="node-b", mem="80Gi"),
    ]


def test_capacity_shortfall_names_capacity_requested_and_left() -> None:
    proc = run("explain", "resourceclaim/forty", "-n", "team-a", "-f", "shared-capacity.yaml")
    assert proc.returncode == 1, proc.stderr
    why = (
        "not enough memory left (requested 40Gi) on 1 device "
        "(e.g. gpu.nvidia.com/node-a/gpu-0: 30Gi of 80Gi left)"
    )
    assert proc.stdout.splitlines() == [
        "ResourceClaim team-a/forty: pending",
        "  fits on no node",
        "  request gpu: needs 1 device(s) of class gpu.nvidia.com; best node node-a has "
        f"0 usable: {why}",
        "  does not fit on 1 node(s) (node-a):",
        "    - request gpu: needs 1 device(s) of class gpu.nvidia.com, 0 usable",
        f"        {why}",
    ]


def test_held_devices_summarised_on_the_best_node() -> None:
    proc = run("explain", "pod/trainer", "-n", "team-a", "-f", "cluster.yaml", "held.yaml")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[:3] == [
        "ResourceClaim team-a/waiting: pending",
        "  fits on no node",
        "  request gpu: needs 1 device(s) of class gpu.nvidia.com; best node node-a has 0 "
        "usable: held by claim(s) team-b/holder-1 on 2 devices (e.g. gpu.nvidia.com/node-a/gpu-0)",
    ]


def test_a_claim_that_fits_exits_0_without_a_summary() -> None:
    proc = run("explain", "resourceclaim/h100", "-n", "team-a", "-f", "cluster.yaml", "claims.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[:3] == [
        "ResourceClaim team-a/h100: pending",
        "  fits on node node-b; would pick:",
        "    gpu: gpu.nvidia.com/node-b/gpu-0",
    ]


def test_not_found_names_the_namespaces_that_have_the_name() -> None:
    proc = run("explain", "resourceclaim/big", "-f", "cluster.yaml", "too-much-memory.yaml")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "error: ResourceClaim default/big: not found; that name exists in namespace(s) "
        "team-a (use -n)\n"
    )
    proc = run("explain", "pod/trainer", "-n", "team-b", "-f", "cluster.yaml", "held.yaml")
    assert proc.stderr == (
        "error: Pod team-b/trainer: not found; that name exists in namespace(s) team-a (use -n)\n"
    )
    proc = run("explain", "pod/nobody", "-n", "team-a", "-f", "cluster.yaml", "held.yaml")
    assert proc.stderr == "error: Pod team-a/nobody: not found\n"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(extra)
    return env


def test_unreachable_server_is_one_line(tmp_path: Path) -> None:
    port = free_port()  # closed once picked: nothing listens there
    config = write_kubeconfig(tmp_path / "config", url=f"http://127.0.0.1:{port}")
    proc = run("explain", "pod/trainer", "--kubeconfig", str(config), env=_env(HOME=str(tmp_path)))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"error: cannot reach the API server http://127.0.0.1:{port}: Connection refused\n"
    )


def test_missing_kubeconfig_says_so(tmp_path: Path) -> None:
    proc = run("explain", "pod/trainer", env=_env(HOME=str(tmp_path)))
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "error: no kubeconfig: --kubeconfig not given, $KUBECONFIG not set and ~/.kube/config "
        "does not exist; pass --kubeconfig FILE, or -f FILE to work offline\n"
    )
    missing = tmp_path / "nope"
    proc = run("explain", "pod/trainer", env=_env(HOME=str(tmp_path), KUBECONFIG=str(missing)))
    assert proc.stderr == (
        f"error: no kubeconfig: $KUBECONFIG names {missing}, which does not exist; "
        "pass --kubeconfig FILE, or -f FILE to work offline\n"
    )
    proc = run("explain", "pod/trainer", "--kubeconfig", str(missing), env=_env())
    assert proc.stderr == f"error: kubeconfig {missing} does not exist\n"


@pytest.fixture
def pods_elsewhere() -> Iterator[str]:
    """A server that has pod ``trainer`` in team-b only (and lists it by name)."""

    def answer(request: Request) -> Reply:
        path = request.path.split("?")[0]
        if path == "/api/v1/pods" and "metadata.name%3Dtrainer" in request.path:
            pod = {"metadata": {"name": "trainer", "namespace": "team-b"}}
            return Reply.json(200, {"items": [pod]})
        if path.endswith("/pods/trainer") or path == "/api/v1/pods":
            return Reply.json(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
        return Reply.json(200, {"items": []})

    with ScriptedServer(answer) as server:
        yield server.url


def test_live_pod_not_found_names_its_namespaces(pods_elsewhere: str, tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", url=pods_elsewhere)
    proc = run("explain", "pod/trainer", "-n", "team-a", "--kubeconfig", str(config), env=_env())
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        "error: Pod team-a/trainer: not found; that name exists in namespace(s) team-b (use -n)\n"
    )
