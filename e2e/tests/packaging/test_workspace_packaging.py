"""Every distribution installs on its own: sdists hold their own files, wheels pin their workspace
siblings, each README's install line names what it needs, and ``kubectl-dra`` installs from the
built wheels into a fresh environment without any service code."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from dra_e2e.checkout import REPO
from dra_e2e.seed import SEED_DIR

API_TYPES_SEED = REPO / "packages" / "api-types" / "tests" / "fixtures" / "seed"
MEMBER_DIRS = (
    *sorted((REPO / "packages").glob("*/pyproject.toml")),
    REPO / "e2e" / "pyproject.toml",
)
# What `kubectl dra` must never bring along: the cluster services and their libraries.
SERVICE_DISTRIBUTIONS = {
    "dra-controller",
    "dra-kubelet-core",
    "dra-kubelet-plugin",
    "dra-computedomain",
    "dra-nvlib",
    "dra-sharing",
    "grpcio",
    "prometheus-client",
}
VALID_CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
"""

# A node with one GPU and a claim for it; the DeviceClass is left to the chart's.
ONE_GPU_CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpu}
spec:
  driver: gpu.nvidia.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes:
      type: {string: gpu}
      productName: {string: NVIDIA H100 80GB HBM3}
    capacity:
      memory: {value: 80Gi}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one, namespace: team-a}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
"""


@dataclass(frozen=True)
class Member:
    """One distribution of the workspace, as its pyproject.toml declares it."""

    name: str
    version: str
    directory: Path
    dependencies: tuple[str, ...]


def _members() -> dict[str, Member]:
    members = {}
    for path in MEMBER_DIRS:
        project = tomllib.loads(path.read_text())["project"]
        members[project["name"]] = Member(
            project["name"], project["version"], path.parent, tuple(project["dependencies"])
        )
    return members


MEMBERS = _members()


def _dist_name(requirement: str) -> str:
    """The normalised distribution name of a PEP 508 requirement."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _siblings(member: Member) -> set[str]:
    return {_dist_name(d) for d in member.dependencies} & MEMBERS.keys()


def _closure(name: str) -> set[str]:
    """``name`` and every workspace distribution it needs, transitively."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(_siblings(MEMBERS[current]))
    return seen


def _uv() -> list[str]:
    # The workspace's wrapper installs uv from PyPI on a machine that lacks it.
    return [shutil.which("uv") or str(REPO / "scripts" / "uv")]


def _isolated_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user's shell: no workspace venv, no test pythonpath."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env["UV_TOOL_DIR"] = str(tmp_path / "tools")
    env["UV_TOOL_BIN_DIR"] = str(tmp_path / "bin")
    return env


def _install(command: list[str], env: dict[str, str], cwd: Path) -> None:
    """Install from the uv cache when it holds everything, else from the configured index."""
    offline = subprocess.run(
        [*command, "--offline"], env=env, cwd=cwd, capture_output=True, text=True, timeout=600
    )
    if offline.returncode != 0:
        subprocess.run(command, env=env, cwd=cwd, check=True, timeout=600)


def _site_distributions(venv: Path) -> set[str]:
    (site,) = venv.glob("lib/python3*/site-packages")
    return {_dist_name(p.name.split("-")[0]) for p in site.glob("*.dist-info")}


def _readme_install_block(member: Member) -> list[str]:
    text = (member.directory / "README.md").read_text()
    match = re.match(r"# [^\n]+\n\n```bash\n(.*?)\n```\n", text, flags=re.S)
    assert match, f"{member.directory.name}/README.md does not start with a bash install block"
    return [line for line in match.group(1).splitlines() if line.strip()]


def _expand_braces(word: str) -> list[str]:
    match = re.fullmatch(r"(.*)\{([^{}]*)\}(.*)", word)
    if not match:
        return [word]
    head, alternatives, tail = match.groups()
    return [f"{head}{alternative}{tail}" for alternative in alternatives.split(",")]


def _pip_install_paths(line: str) -> list[str]:
    words = line.split("#")[0].split()
    assert words[:2] == ["pip", "install"], line
    return [path for word in words[2:] for path in _expand_braces(word)]


def test_seed_fixtures_are_byte_equal_copies_of_the_charts() -> None:
    chart = sorted(p.name for p in SEED_DIR.glob("*.yaml"))
    assert chart == ["pod-gpu-test-pod.yaml", "resourceclaimtemplate-single-gpu.yaml"]
    for name in chart:
        copy = API_TYPES_SEED / name
        assert not copy.is_symlink(), f"{copy}: a link leaves the package's sdist"
        assert copy.read_bytes() == (SEED_DIR / name).read_bytes(), f"{copy} drifted from the chart"


def test_no_distribution_holds_a_symbolic_link() -> None:
    links = [
        str(path.relative_to(REPO))
        for member in MEMBERS.values()
        for path in member.directory.rglob("*")
        if path.is_symlink()
    ]
    assert links == [], "an sdist cannot carry links out of its package"


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_sibling_dependencies_pin_the_workspace_version(name: str) -> None:
    member = MEMBERS[name]
    sources = tomllib.loads((member.directory / "pyproject.toml").read_text())
    workspace_sources = sources.get("tool", {}).get("uv", {}).get("sources", {})
    for requirement in member.dependencies:
        sibling = _dist_name(requirement)
        if sibling in MEMBERS:
            assert requirement == f"{sibling}=={MEMBERS[sibling].version}", (name, requirement)
            assert workspace_sources.get(sibling) == {"workspace": True}, (name, sibling)


@pytest.mark.parametrize("name", sorted(set(MEMBERS) - {"dra-e2e"}))
def test_readme_starts_with_an_install_line_naming_every_sibling(name: str) -> None:
    member = MEMBERS[name]
    install, *example = _readme_install_block(member)
    paths = _pip_install_paths(install)
    wanted = {f"./{MEMBERS[d].directory.relative_to(REPO)}" for d in _closure(name)}
    assert set(paths) == wanted, f"{name}: plain pip needs every sibling named"
    # A dependency before its dependents reads as the order pip builds them in.
    assert paths[-1] == f"./{member.directory.relative_to(REPO)}"
    assert example, f"{name}: README has no example under its install line"


def test_e2e_readme_starts_with_its_install_line() -> None:
    install, *example = _readme_install_block(MEMBERS["dra-e2e"])
    assert install.startswith("make install"), install
    assert any(line.startswith("e2e-cluster ") for line in example), example


@pytest.mark.parametrize("name", sorted(set(MEMBERS) - {"dra-e2e"}))
def test_readme_example_runs_from_any_directory(name: str, tmp_path: Path) -> None:
    _, *example = _readme_install_block(MEMBERS[name])
    # kubectl's plugin discovery runs `kubectl-dra` for `kubectl dra`; CI may have no kubectl.
    script = "\n".join(line.replace("kubectl dra ", "kubectl-dra ") for line in example)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TMPDIR"] = str(tmp_path)
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    # Exit 1 is a finding (`kubectl dra validate` on an invalid example); 2 and up are errors.
    assert result.returncode in (0, 1), output
    assert result.stdout.strip(), output
    assert "Traceback" not in output
    assert "No such file" not in output


@pytest.mark.slow
def test_controller_readme_line_installs_with_plain_pip_semantics(tmp_path: Path) -> None:
    """The line that failed before: siblings come from the named folders, never an index."""
    (install, *_) = _readme_install_block(MEMBERS["dra-controller"])
    venv = tmp_path / "venv"
    env = _isolated_env(tmp_path)
    subprocess.run(
        [*_uv(), "venv", "-q", "--python", sys.executable, str(venv)], env=env, check=True
    )
    env["VIRTUAL_ENV"] = str(venv)
    # --no-sources: resolve as pip does, without the workspace's [tool.uv.sources].
    _install(
        [*_uv(), "pip", "install", "-q", "--no-sources", *_pip_install_paths(install)], env, REPO
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for script in ("dra-allocation-controller", "dra-webhook"):
        result = subprocess.run(
            [str(venv / "bin" / script), "--help"],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
    assert _closure("dra-controller") <= _site_distributions(venv)


@pytest.mark.slow
def test_kubectl_dra_installs_alone_from_the_built_wheels(tmp_path: Path) -> None:
    """``kubectl-dra`` installed as a tool the way a user does (issue #24, item 7): its own
    virtual environment under ``UV_TOOL_DIR``, the script linked into ``UV_TOOL_BIN_DIR``,
    from the wheels just built (``--find-links``), then run from a directory that is not the
    checkout: ``--help``, ``validate`` and an offline ``allocate`` that needs the chart's
    DeviceClasses shipped inside the wheels.

    ``uv tool install``, not ``pipx install``: pipx is no dependency of the workspace, so
    the test would first have to fetch it, and pipx resolves the third-party dependencies
    (PyYAML, pydantic, the CEL library) with pip from the index, which has no access to
    uv's cache: it cannot run offline. ``uv tool install`` makes the same isolated
    environment and bin link as pipx, and ``_install`` tries it ``--offline`` first (the
    built wheels and uv's cache), reaching the index only when the cache lacks a package.
    """
    dist = tmp_path / "dist"
    env = _isolated_env(tmp_path)
    # The sdist first, then the wheel from it: an sdist missing a file fails here.
    subprocess.run(
        [*_uv(), "build", "--all-packages", "--quiet", "-o", str(dist)],
        cwd=REPO,
        env=env,
        check=True,
        timeout=600,
    )
    for member in MEMBERS.values():
        stem = f"{member.name.replace('-', '_')}-{member.version}"
        assert (dist / f"{stem}.tar.gz").is_file(), stem
        wheel = dist / f"{stem}-py3-none-any.whl"
        with zipfile.ZipFile(wheel) as archive:
            metadata = archive.read(f"{stem}.dist-info/METADATA").decode()
        requires = re.findall(r"^Requires-Dist: (.+)$", metadata, flags=re.M)
        pinned = {r for r in requires if _dist_name(r) in MEMBERS}
        wanted = {f"{d}=={MEMBERS[d].version}" for d in _siblings(member)}
        assert pinned == wanted, f"{wheel.name}: {sorted(pinned)}"

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    version = MEMBERS["kubectl-dra"].version
    # As the README says: the wheels found by --find-links, third-party packages from the index.
    _install(
        [
            *_uv(),
            "tool",
            "install",
            "--python",
            sys.executable,
            "--find-links",
            str(dist),
            f"kubectl-dra=={version}",
        ],
        env,
        elsewhere,
    )
    tool_venv = tmp_path / "tools" / "kubectl-dra"
    installed = _site_distributions(tool_venv)
    assert _closure("kubectl-dra") <= installed
    assert not installed & SERVICE_DISTRIBUTIONS, sorted(installed & SERVICE_DISTRIBUTIONS)
    (site,) = tool_venv.glob("lib/python3*/site-packages")
    # The built wheel, not a link back into the checkout.
    cli = site / "kubectl_dra" / "cli.py"
    assert cli.read_bytes() == (REPO / "packages/kubectl-dra/src/kubectl_dra/cli.py").read_bytes()
    for pth in site.glob("*.pth"):
        assert str(REPO) not in pth.read_text(), f"{pth.name}: an editable install of the checkout"

    kubectl_dra = str(tmp_path / "bin" / "kubectl-dra")
    help_text = subprocess.run(
        [kubectl_dra, "--help"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=60
    )
    assert help_text.returncode == 0, help_text.stderr
    assert all(c in help_text.stdout for c in ("allocate", "explain", "validate", "migrate"))

    (elsewhere / "class.yaml").write_text(VALID_CLASS)
    (elsewhere / "bad.yaml").write_text(VALID_CLASS.replace("'gpu.nvidia.com'", "1"))
    valid = subprocess.run(
        [kubectl_dra, "validate", "-f", "class.yaml"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert valid.returncode == 0, valid.stdout + valid.stderr
    invalid = subprocess.run(
        [kubectl_dra, "validate", "-f", "bad.yaml"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert invalid.returncode == 1, invalid.stdout + invalid.stderr
    assert "device.driver == 1" in invalid.stdout + invalid.stderr

    # Offline allocation with no DeviceClass in the input: the chart's come from the wheel.
    (elsewhere / "cluster.yaml").write_text(ONE_GPU_CLUSTER)
    allocated = subprocess.run(
        [kubectl_dra, "allocate", "-f", "cluster.yaml", "-o", "wide"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert allocated.returncode == 0, allocated.stdout + allocated.stderr
    header, row = allocated.stdout.splitlines()
    assert header.split()[:4] == ["NAMESPACE", "CLAIM", "POD", "STATE"]
    assert row.split()[:5] == ["team-a", "one", "<none>", "allocated", "node-a"]
    assert "DeviceClass gpu.nvidia.com: not in the input" in allocated.stderr
