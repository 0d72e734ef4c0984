"""kind/ for users with Docker. kind cannot run on this machine (its nodes are privileged
containers), so what is tested here is what can be: the scripts pass shellcheck, and the cluster
configs (checked-in and generated) decode strictly with kind's own config types."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

# --import-mode=importlib gives tests no package: the shared helpers are found by path.
sys.path.insert(0, str(Path(__file__).parent))
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
