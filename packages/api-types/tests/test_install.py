"""`pip install ./packages/api-types` into an empty venv works on its own."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]

CHECK = """
import importlib.resources as r
import dra_api_types as d
assert str(d.Quantity.parse("1.5Gi")) == "1536Mi"
text = "apiVersion: resource.k8s.io/v1\\nkind: DeviceClass\\nmetadata: {name: gpu.nvidia.com}\\n"
objs = d.load_all(text)
assert isinstance(objs[0], d.DeviceClass)
files = r.files("dra_api_types.crds").iterdir()
names = sorted(p.name for p in files if p.name.endswith(".yaml"))
assert names == [
    "resource.nvidia.com_computedomaincliques.yaml",
    "resource.nvidia.com_computedomains.yaml",
], names
print("ok", len(d.__all__))
"""


def _uv() -> list[str]:
    found = shutil.which("uv")
    if found:
        return [found]
    # The workspace's wrapper installs uv from PyPI when the machine lacks it.
    wrapper = PACKAGE.parents[1] / "scripts" / "uv"
    if wrapper.is_file():
        return ["bash", str(wrapper)]
    return [sys.executable, "-m", "uv"]


@pytest.mark.slow
def test_package_installs_into_an_empty_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = {**os.environ, "VIRTUAL_ENV": str(venv)}
    env.pop("PYTHONPATH", None)
    subprocess.run(
        [
            *_uv(),
            "venv",
            "-q",
            "--python",
            f"{sys.version_info.major}.{sys.version_info.minor}",
            str(venv),
        ],
        check=True,
        env=env,
        timeout=120,
    )
    install = [*_uv(), "pip", "install", "-q", str(PACKAGE)]
    offline = subprocess.run(
        [*install, "--offline"], env=env, capture_output=True, text=True, timeout=300
    )
    if offline.returncode != 0:
        # Nothing cached yet (a fresh machine): fetch from the index.
        subprocess.run(install, check=True, env=env, timeout=300)
    python = venv / "bin" / "python"
    result = subprocess.run(
        [str(python), "-c", CHECK],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok ")
    freeze = subprocess.run(
        [*_uv(), "pip", "freeze"], capture_output=True, text=True, env=env, check=True, timeout=60
    ).stdout
    installed = {line.split("==")[0].split(" @ ")[0].lower() for line in freeze.splitlines()}
    # Only the package and its declared runtime dependencies: no workspace leakage.
    assert "dra-api-types" in installed
    assert not {"dra-nvlib", "dra-controller", "dra-kubelet-plugin"} & installed
