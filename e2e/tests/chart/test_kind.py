"""kind/ for users with Docker. kind cannot run on this machine (its nodes are privileged
containers), so what is tested here is what can be: the scripts pass shellcheck, and the cluster
configs (checked-in and generated) decode strictly with kind's own config types."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

# --import-mode=importlib gives tests no package: the shared helpers are found by path.
from chart_helpers import REPO

KIND = REPO / "kind"
VALIDATOR_SRC = KIND / "tools" / "validate-config"
SCRIPTS = [KIND / "up.sh", REPO / "deployments" / "tools" / "helm"]


@pytest.fixture(scope="session")
def validator() -> Path:
    """kind/tools/validate-config, built once per source hash into ~/.cache."""
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((VALIDATOR_SRC / name).read_bytes())
    out = Path.home() / ".cache" / "dra-kind-validate" / digest.hexdigest()[:16] / "validate-config"
    if not out.is_file():
        out.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
        proc = subprocess.run(
            ["nice", "go", "build", "-o", str(out), "."],
            cwd=VALIDATOR_SRC,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
    return out


def _validate(validator: Path, *paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(validator), *map(str, paths)], capture_output=True, text=True, check=False
    )


def _up(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KIND / "up.sh"), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_pass_shellcheck(script: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck is installed by make prepare"
    proc = subprocess.run([shellcheck, str(script)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout


def test_checked_in_configs_decode_with_kinds_types(validator: Path) -> None:
    configs = sorted(KIND.glob("cluster-*.yaml"))
    assert [p.name for p in configs] == ["cluster-fake.yaml", "cluster-gpu.yaml"]
    proc = _validate(validator, *configs)
    assert proc.returncode == 0, proc.stderr


def test_validator_rejects_a_misspelled_field(validator: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((KIND / "cluster-gpu.yaml").read_text().replace("extraMounts", "extraMount"))
    proc = _validate(validator, bad)
    assert proc.returncode == 1
    assert 'unknown field "extraMount"' in proc.stderr


def test_configs_enable_what_the_driver_needs() -> None:
    for path in sorted(KIND.glob("cluster-*.yaml")):
        config = yaml.safe_load(path.read_text())
        assert config["runtimeConfig"] == {
            "resource.k8s.io/v1beta1": "true",
            "resource.k8s.io/v1beta2": "true",
        }, path.name
        (patch,) = config["containerdConfigPatches"]
        assert "enable_cdi = true" in patch
        assert '"/var/run/cdi"' in patch, "the chart's default cdiRoot"
        assert {n["role"] for n in config["nodes"]} == {"control-plane", "worker"}


def test_fake_mode_prints_the_checked_in_config() -> None:
    proc = _up("--print-config")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (KIND / "cluster-fake.yaml").read_text()


def test_gpu_mode_mounts_every_nvidia_device(validator: Path, tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    (dev / "nvidia-not-a-device").write_text("")
    proc = _up("--gpu", "--print-config", env={"DEV_DIR": str(dev)})
    assert proc.returncode == 0, proc.stderr
    generated = tmp_path / "gpu.yaml"
    generated.write_text(proc.stdout)
    check = _validate(validator, generated)
    assert check.returncode == 0, check.stderr
    (worker,) = [n for n in yaml.safe_load(proc.stdout)["nodes"] if n["role"] == "worker"]
    devices = {m["containerPath"]: m["hostPath"] for m in worker["extraMounts"]}
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        assert devices[f"/dev/{name}"] == str(dev / name)
    assert "/dev/nvidia-not-a-device" not in devices
    assert devices["/driver-root/usr/lib/x86_64-linux-gnu"] == "/usr/lib/x86_64-linux-gnu"


def test_gpu_mode_without_devices_says_why(tmp_path: Path) -> None:
    proc = _up("--gpu", "--print-config", env={"DEV_DIR": str(tmp_path)})
    assert proc.returncode != 0
    assert "no NVIDIA device nodes" in proc.stderr


def test_unknown_argument_is_refused() -> None:
    proc = _up("--gpus")
    assert proc.returncode == 2
    assert "unknown argument --gpus" in proc.stderr


FAKE_TOOL = Path(__file__).parent / "fake_tools" / "fake_tool.py"
HARNESS_KUBE_VERSION = re.search(
    r'^KUBERNETES_VERSION = "(v[0-9.]+)"$',
    (REPO / "e2e" / "src" / "dra_e2e" / "versions.py").read_text(),
    re.MULTILINE,
)


def _fake_tools(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A PATH whose docker, kind, kubectl, helm and uv record their calls; the log's path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("docker", "kind", "kubectl", "helm", "uv"):
        (bin_dir / tool).symlink_to(FAKE_TOOL)
    log = tmp_path / "calls.jsonl"
    real_uv = shutil.which("uv") or str(REPO / "scripts" / "uv")
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_TOOLS_LOG": str(log),
        "FAKE_REAL_UV": real_uv,
        "UV": str(bin_dir / "uv"),
        "HELM": str(bin_dir / "helm"),
        "TMPDIR": str(tmp_path),
    }
    return env, log


def _calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def _commands(calls: list[dict[str, Any]]) -> list[list[str]]:
    return [[c["tool"], *c["args"]] for c in calls]


def test_up_issues_the_commands_of_a_fake_cluster(tmp_path: Path) -> None:
    env, log = _fake_tools(tmp_path)
    proc = _up(
        "--no-tests", env={**env, "FAKE_GPUS": "2xH100-80GB,1xL4", "FAKE_PUBLISHED_GPUS": "3"}
    )
    assert proc.returncode == 0, proc.stderr
    calls = _calls(log)
    commands = _commands(calls)
    chart = REPO / "deployments" / "helm" / "dra-driver-nvidia-gpu"
    version = yaml.safe_load((chart / "Chart.yaml").read_text())["appVersion"]
    image = f"dra-driver-nvidia-gpu-py:{version}"
    assert HARNESS_KUBE_VERSION is not None
    node_image = f"kindest/node:{HARNESS_KUBE_VERSION.group(1)}"

    (create,) = [c for c in commands if c[:3] == ["kind", "create", "cluster"]]
    config = create[create.index("--config") + 1]
    assert create == [
        "kind", "create", "cluster", "--name", "dra-nvidia-fake", "--config", config,
        "--image", node_image,
    ]  # fmt: skip
    (save,) = [c for c in commands if c[:3] == ["docker", "image", "save"]]
    archive = save[save.index("--output") + 1]
    assert save == [
        "docker", "image", "save", "--platform", "linux/amd64", "--output", archive, image
    ]  # fmt: skip
    (build,) = [c for c in commands if c[:2] == ["docker", "build"]]
    assert build == [
        "docker", "build", "--platform", "linux/amd64", "-f", str(REPO / "images" / "Dockerfile"),
        "-t", image, str(REPO),
    ]  # fmt: skip
    (load,) = [c for c in calls if c["args"][:2] == ["load", "image-archive"]]
    assert load["args"] == ["load", "image-archive", archive, "--name", "dra-nvidia-fake"]
    assert load["archive_exists"], "the archive is written before kind loads it"
    # Never `kind load docker-image` (broken under Docker's containerd store), never docker load.
    assert not [c for c in commands if "docker-image" in c or c[:2] == ["docker", "load"]]
    assert commands.index(build) < commands.index(save) < commands.index(["kind", *load["args"]])

    (install,) = [c for c in commands if c[:3] == ["helm", "upgrade", "--install"]]
    assert install[3:5] == ["dra-driver-nvidia-gpu", str(chart)]
    sets = [install[i + 1] for i, arg in enumerate(install) if arg == "--set"]
    assert "devices.backend=fake" in sets
    assert "devices.fakeGpus={2xH100-80GB,1xL4}" in sets
    assert "image.pullPolicy=Never" in sets

    # Only GPU nodes are waited for: the nodes that are not the (tainted) control plane.
    (nodes,) = [c for c in commands if c[:3] == ["kubectl", "get", "nodes"]]
    assert nodes[3:5] == ["-l", "!node-role.kubernetes.io/control-plane"]
    waits = [c for c in commands if "--field-selector" in c]
    assert waits
    assert all(
        c[c.index("--field-selector") + 1]
        == "spec.nodeName=dra-nvidia-fake-worker,spec.driver=gpu.nvidia.com"
        for c in waits
    )
    assert "waiting for 3 GPUs" in proc.stdout, "2xH100-80GB,1xL4 is 3 GPUs per node"

    kubeconfigs = {c["kubeconfig"] for c in calls if c["tool"] in ("kubectl", "helm")}
    (kubeconfig,) = kubeconfigs
    assert kubeconfig
    assert Path(kubeconfig).read_text().startswith("apiVersion: v1")
    assert not [c for c in commands if c[0] == "uv"], "--no-tests runs no suite"
    assert not Path(config).exists(), "temporary files removed"
    assert not Path(archive).exists(), "temporary files removed"


def test_up_runs_the_suite_on_the_gpu_nodes_of_its_release(tmp_path: Path) -> None:
    env, log = _fake_tools(tmp_path)
    proc = _up(env={**env, "FAKE_PUBLISHED_GPUS": "8"})
    assert proc.returncode == 0, proc.stderr
    (suite,) = [c for c in _calls(log) if c["tool"] == "uv"]
    assert suite["args"] == [
        "run", "--frozen", "--all-packages", "pytest", "e2e/tests/driver", "-m", "e2e",
        "-p", "no:cacheprovider",
    ]  # fmt: skip
    assert suite["env"]["DRA_E2E_RELEASE"] == "dra-driver-nvidia-gpu/dra-driver-nvidia-gpu"
    assert suite["env"]["DRA_E2E_FAKE_GPUS"] == "4xA100-40GB,4xL4"
    assert suite["env"]["DRA_E2E_NODE_SELECTOR"] == "!node-role.kubernetes.io/control-plane"
    assert suite["env"]["DRA_E2E_KUBECONFIG"] == suite["kubeconfig"]
    assert "waiting for 8 GPUs" in proc.stdout


def test_up_refuses_a_bad_fake_gpu_spec_before_making_a_cluster(tmp_path: Path) -> None:
    env, log = _fake_tools(tmp_path)
    proc = _up("--no-tests", env={**env, "FAKE_GPUS": "4xA100-40GB,2xB9000"})
    assert proc.returncode != 0
    assert "unknown GPU model 'B9000'" in proc.stderr
    assert not [c for c in _commands(_calls(log)) if c[0] in ("kind", "docker", "helm")]


def test_up_reuses_an_existing_cluster_and_honours_a_node_image(tmp_path: Path) -> None:
    env, log = _fake_tools(tmp_path)
    pinned = "kindest/node:v1.37.2@sha256:" + "0" * 64
    proc = _up("--no-tests", env={**env, "KIND_NODE_IMAGE": pinned, "FAKE_PUBLISHED_GPUS": "8"})
    assert proc.returncode == 0, proc.stderr
    (create,) = [c for c in _commands(_calls(log)) if c[:3] == ["kind", "create", "cluster"]]
    assert create[-2:] == ["--image", pinned]
