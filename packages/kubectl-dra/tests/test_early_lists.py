"""A live explain asks for the cluster's lists before it imports the allocator: the API
server builds them while this process loads the models and the CEL compiler."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dra_kube_client.testing import ScriptedServer
from dra_kube_client.testing.scripted_http import Reply, Request

# Run in a fresh interpreter: what is imported when is the point.
_PROBE = """
import json, sys
from kubectl_dra import cluster_lists
seen = []
original = cluster_lists.ClusterLists.__init__
def probe(self, *args, **kwargs):
    seen.append({m: m in sys.modules for m in ("kubectl_dra.commands", "dra_allocator.allocator",
                                               "pydantic", "lark")})
    original(self, *args, **kwargs)
cluster_lists.ClusterLists.__init__ = probe
from kubectl_dra.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "seen": seen}))
"""


def _run(*argv: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    return result


def _refusing(request: Request) -> Reply:
    return Reply.status_error(403, f"{request.path} forbidden", reason="Forbidden")


def test_live_explain_asks_for_the_lists_before_importing_the_allocator(tmp_path: Path) -> None:
    with ScriptedServer(_refusing) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        result = _run("explain", "pod/p", "--kubeconfig", str(kubeconfig))
    # The refusal is reported as before (exit 2), by the command, once it has loaded.
    assert result["code"] == 2
    assert result["seen"] == [
        {
            "kubectl_dra.commands": False,
            "dra_allocator.allocator": False,
            "pydantic": False,
            "lark": False,
        }
    ]


def test_only_a_live_explain_of_a_target_starts_the_lists_early(tmp_path: Path) -> None:
    manifest = tmp_path / "claim.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    with ScriptedServer(_refusing) as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        # Offline (-f): no request at all.
        offline = _run("explain", "pod/p", "-f", str(manifest), "--kubeconfig", str(kubeconfig))
        # No target: the usage error, without contacting the cluster.
        missing = _run("explain", "--kubeconfig", str(kubeconfig))
        validate = _run("validate", "-f", str(manifest))
    assert (offline["code"], offline["seen"]) == (2, [])
    assert (missing["code"], missing["seen"]) == (2, [])
    assert (validate["code"], validate["seen"]) == (0, [])


def test_a_kubeconfig_that_cannot_be_used_is_reported_by_the_command(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, "explain", "pod/p", "--kubeconfig", str(tmp_path / "no")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(out.stdout.splitlines()[-1]) == {"code": 2, "seen": []}
    assert out.stderr == f"error: kubeconfig {tmp_path / 'no'} does not exist\n"
