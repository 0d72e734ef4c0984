"""An existing cluster only when asked (``--kubeconfig`` / ``$DRA_E2E_KUBECONFIG``), never the
ambient ``$KUBECONFIG``: the e2e fixture and the demo; and the demo's teardown and its failures."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from dra_e2e.checkout import REPO
from dra_e2e.errors import ComponentError, PrerequisiteError
from dra_e2e.prerequisites import Purpose, needed

DEMO = REPO / "deployments" / "demo_walkthrough.py"
PROBE = """
def test_which(pytestconfig):
    from dra_e2e.pytest_plugin import external_kubeconfig
    print("EXTERNAL", external_kubeconfig(pytestconfig))
"""


def _external_as_seen_by_pytest(tmp_path: Path, env: dict[str, str], *args: str) -> str:
    (tmp_path / "test_probe.py").write_text(PROBE)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", *args,
         str(tmp_path / "test_probe.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = (line for line in result.stdout.splitlines() if "EXTERNAL" in line)
    return line.split("EXTERNAL ", 1)[1].removesuffix(".")


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "DRA_E2E_KUBECONFIG")}
    return {**env, **extra}


def test_the_fixture_ignores_the_ambient_kubeconfig(tmp_path: Path) -> None:
    env = _clean_env(KUBECONFIG="/root/.kube/config")
    assert _external_as_seen_by_pytest(tmp_path, env) == "None"


def test_the_fixture_uses_the_cluster_asked_for(tmp_path: Path) -> None:
    env = _clean_env(KUBECONFIG="/ambient", DRA_E2E_KUBECONFIG="/asked/by-env")
    assert _external_as_seen_by_pytest(tmp_path, env) == "/asked/by-env"
    flag = _external_as_seen_by_pytest(tmp_path, env, "--kubeconfig", "/asked/by-flag")
    assert flag == "/asked/by-flag"


def _demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo_walkthrough", DEMO)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class _Calls:
    """What the stand-ins saw."""

    log: list[tuple[str, ...]] = field(default_factory=list)


def test_demo_without_runc_fails_in_seconds_with_one_line(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the tools are checked after root; the line for a non-root user differs")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for prerequisite in needed(Purpose.E2E):
        name = prerequisite.tool.name
        if not prerequisite.tool.paths and name != "runc":
            found = shutil.which(name)
            assert found is not None, f"{name} is missing here: run `make prepare` first"
            (bin_dir / name).symlink_to(found)
    env = _clean_env(PATH=str(bin_dir))
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(DEMO), "--no-install"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert result.stderr == "demo: required tool 'runc' not found: apt-get install runc\n"
    assert "nothing to tear down" not in result.stdout + result.stderr
    assert elapsed < 20, f"the demo took {elapsed:.1f}s to fail"


def _stub_local(
    demo: ModuleType, monkeypatch: pytest.MonkeyPatch, up_error: Exception | None
) -> _Calls:
    calls = _Calls()

    def check(purpose: Purpose) -> None:
        calls.log.append(("check", purpose.name))

    def install_missing(purpose: Purpose, **_: Any) -> list[str]:
        calls.log.append(("install", purpose.name))
        return []

    class FakeCluster:
        def __init__(self, state_dir: Path) -> None:
            self.state_dir = state_dir

        def up(self, **_: Any) -> None:
            calls.log.append(("up",))
            if up_error is not None:
                raise up_error

        def down(self, **_: Any) -> list[str]:
            calls.log.append(("down",))
            return []

    monkeypatch.setattr(demo.preflight, "check", check)
    monkeypatch.setattr(demo.preflight, "install_missing", install_missing)
    monkeypatch.setattr(demo, "ensure_binaries", lambda **_: calls.log.append(("build",)))
    monkeypatch.setattr(demo, "Cluster", FakeCluster)
    return calls


def test_demo_tears_nothing_down_when_nothing_started(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = _demo()
    calls = _stub_local(demo, monkeypatch, ComponentError("etcd", "exited while starting"))
    assert demo.main([]) == 1
    assert calls.log == [("install", "E2E"), ("check", "E2E"), ("build",), ("up",)]
    err = capsys.readouterr().err
    assert err == "demo: etcd: exited while starting\n"


def test_demo_checks_the_host_before_building(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = _demo()
    calls = _stub_local(demo, monkeypatch, None)

    def no_runc(purpose: Purpose) -> None:
        raise PrerequisiteError("required tool 'runc' not found", "apt-get install runc")

    monkeypatch.setattr(demo.preflight, "check", no_runc)
    assert demo.main(["--no-install"]) == 1
    assert calls.log == []
    assert capsys.readouterr().err == "demo: required tool 'runc' not found: apt-get install runc\n"


class _FakeKubectl:
    """Records kubectl calls; every ``get`` finds its object."""

    calls: list[tuple[str, ...]] = []

    def __init__(self, binary: Path, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def exists(self, *args: str) -> bool:
        self.calls.append(("exists", *args))
        return True

    def run(self, *args: str, **_: Any) -> str:
        self.calls.append(args)
        return ""


def test_demo_on_an_existing_cluster_refuses_a_namespace_it_did_not_create(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    demo = _demo()
    _FakeKubectl.calls = []
    monkeypatch.setattr(demo, "Kubectl", _FakeKubectl)
    monkeypatch.setattr(demo, "default_kubectl", lambda: Path("/usr/bin/kubectl"))
    assert demo.main(["--kubeconfig", str(tmp_path / "kubeconfig")]) == 1
    assert _FakeKubectl.calls == [("exists", "namespace", "dra-demo")]
    err = capsys.readouterr().err
    assert err.startswith("demo: namespace dra-demo already exists")
    assert err.count("\n") == 1


def test_demo_ignores_the_ambient_kubeconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    demo = _demo()
    seen: list[tuple[str, Any]] = []
    monkeypatch.setenv("KUBECONFIG", "/root/.kube/config")
    monkeypatch.delenv("DRA_E2E_KUBECONFIG", raising=False)
    monkeypatch.setattr(demo, "on_local_cluster", lambda **kw: seen.append(("local", kw)))
    monkeypatch.setattr(demo, "on_existing_cluster", lambda *a: seen.append(("existing", a)))
    assert demo.main([]) == 0
    monkeypatch.setenv("DRA_E2E_KUBECONFIG", "/asked")
    assert demo.main([]) == 0
    assert seen == [
        ("local", {"keep": False, "install": True}),
        ("existing", (Path("/asked"), "dra-demo")),
    ]
