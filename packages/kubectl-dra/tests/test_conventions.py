"""kubectl's conventions on every ``kubectl dra`` subcommand (issue #24, item 5): ``-f``
(repeatable, several files after one ``-f``, ``-``) without swallowing the positional,
``-o``, ``-n``, ``--kubeconfig``/``--context``, ``--version``, examples in ``--help``, ``-v``;
and the spellings scripts already use keep working."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from dra_kube_client.testing import Reply, Request, ScriptedServer, write_kubeconfig

FIXTURES = Path(__file__).parent / "fixtures" / "cli"
SCRIPT = Path(sys.executable).with_name("kubectl-dra")
COMMANDS = ("allocate", "explain", "validate", "migrate")


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The console script in the fixture directory."""
    return subprocess.run(
        [str(SCRIPT), *args],
        cwd=FIXTURES,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        check=False,
    )


def test_version_on_the_plugin_and_every_subcommand() -> None:
    for args in (["--version"], *([c, "--version"] for c in COMMANDS)):
        proc = run(*args)
        assert (proc.returncode, proc.stdout) == (0, "kubectl-dra 0.1.0\n"), args


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_examples_and_the_kubectl_flags(command: str) -> None:
    proc = run(command, "--help")
    assert proc.returncode == 0
    examples = proc.stdout.split("examples:\n", 1)[1].splitlines()
    assert len(examples) >= 2
    assert all(f"kubectl dra {command} " in e for e in examples if e)
    for flag in ("-f FILE_OR_DIR", "-n NAMESPACE", "--kubeconfig", "--context", "-v LEVEL"):
        assert flag in proc.stdout, (command, flag)


def test_plugin_help_names_the_kubectl_plugin_form() -> None:
    proc = run("--help")
    assert "kubectl finds it as a plugin" in proc.stdout
    assert "  kubectl dra explain pod/trainer -n team-a" in proc.stdout


def test_files_after_one_f_do_not_swallow_the_target() -> None:
    before = run("explain", "pod/trainer", "-n", "team-a", "-f", "cluster.yaml", "held.yaml")
    after = run("explain", "-f", "cluster.yaml", "held.yaml", "pod/trainer", "-n", "team-a")
    repeated = run(
        "explain", "-n", "team-a", "-f", "cluster.yaml", "-f", "held.yaml", "pod/trainer"
    )
    assert before.returncode == after.returncode == repeated.returncode == 1, after.stderr
    assert before.stdout == after.stdout == repeated.stdout
    assert after.stdout.startswith("ResourceClaim team-a/waiting: pending\n")


def test_explain_without_a_target_is_an_error() -> None:
    proc = run("explain", "-f", "cluster.yaml")
    assert (proc.returncode, proc.stderr) == (
        2,
        "error: TARGET: missing: give pod/NAME or resourceclaim/NAME\n",
    )


def test_flags_before_the_subcommand() -> None:
    proc = run("-n", "team-a", "explain", "resourceclaim/h100", "-f", "cluster.yaml", "claims.yaml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ResourceClaim team-a/h100: pending\n")


def test_allocate_claim_name_resolves_in_the_namespace() -> None:
    qualified = run("allocate", "-f", "cluster.yaml", "claims.yaml", "--claim", "team-a/h100")
    short = run("allocate", "-f", "cluster.yaml", "claims.yaml", "--claim", "h100", "-n", "team-a")
    assert qualified.returncode == short.returncode == 0, short.stderr
    assert short.stdout == qualified.stdout
    assert list(yaml.safe_load(short.stdout)["claims"]) == ["team-a/h100"]
    wrong = run("allocate", "-f", "cluster.yaml", "claims.yaml", "--claim", "h100")
    assert wrong.returncode == 2
    assert "default/h100" in wrong.stderr


def test_long_spellings_and_stdin_keep_working() -> None:
    claims = (FIXTURES / "claims.yaml").read_text(encoding="utf-8")
    proc = run("allocate", "--filename", "cluster.yaml", "-", "--output", "json", stdin=claims)
    assert proc.returncode == 0, proc.stderr
    assert set(json.loads(proc.stdout)["claims"]) == {"team-a/single", "team-a/h100"}


def test_validate_output_json_is_the_findings_as_data(tmp_path: Path) -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "bad", "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"count": 1}}]}},
    }
    path = tmp_path / "claim.yaml"
    path.write_text(yaml.safe_dump(claim), encoding="utf-8")
    text = run("validate", "-f", str(path))
    data = run("validate", "-f", str(path), "-o", "json")
    assert text.returncode == data.returncode == 1
    report = json.loads(data.stdout)
    assert report["ok"] is False
    assert report["summary"] == text.stdout.splitlines()[-1]
    (finding,) = report["findings"]
    assert finding["object"] == "ResourceClaim team-a/bad"
    assert finding["field"] == "spec.devices.requests[0].exactly.deviceClassName"
    assert finding["severity"] == "error"
    assert text.stdout.splitlines()[0] == (
        f"{finding['where']}: {finding['object']}: {finding['field']}: {finding['message']}"
    )
    assert yaml.safe_load(run("validate", "-f", str(path), "-o", "yaml").stdout) == report


@pytest.fixture
def empty_cluster() -> Iterator[str]:
    """An API server with no objects."""

    def answer(request: Request) -> Reply:
        return Reply.json(200, {"items": []})

    with ScriptedServer(answer) as server:
        yield server.url


def test_kubeconfig_flag_and_verbosity(empty_cluster: str, tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "config", url=empty_cluster)
    quiet = run("explain", "resourceclaim/x", "--kubeconfig", str(config))
    assert quiet.stderr == "error: ResourceClaim default/x: not found\n"
    loud = run("explain", "resourceclaim/x", "--kubeconfig", str(config), "-v", "1")
    assert loud.stderr.splitlines()[0] == (
        "INFO kubectl_dra.live: fetched path=/apis/resource.k8s.io/v1/deviceclasses items=0"
    )
    assert loud.stderr.splitlines()[-1] == quiet.stderr.strip()
    other = run("explain", "resourceclaim/x", "--kubeconfig", str(config), "--context", "nope")
    assert other.returncode == 2
    assert other.stderr.startswith(f"error: cannot load kubeconfig {config}: ")
