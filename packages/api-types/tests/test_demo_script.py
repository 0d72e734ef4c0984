"""`make demo` (scripts/demo.py) validates the seed and demo objects and flags bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[3] / "scripts" / "demo.py"

pytestmark = pytest.mark.skipif(not DEMO.is_file(), reason="not in the workspace checkout")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(DEMO), *args], capture_output=True, text=True, timeout=120
    )


def test_demo_summarizes_every_object_and_succeeds() -> None:
    result = _run()
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "DeviceClass gpu.nvidia.com" in out
    assert "gpu-0: type=gpu productName=NVIDIA GB200" in out
    assert "memory=189471Mi" in out
    assert "ResourceClaimTemplate default/single-gpu" in out
    assert "request gpu: 1 x gpu.nvidia.com" in out
    assert '"strategy": "MPS"' in out
    assert "VfioDeviceConfig (normalized)" in out
    assert "ComputeDomain imex-channel-injection" in out
    assert out.rstrip().endswith("all objects valid")


def test_demo_fails_on_an_invalid_manifest(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
        "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: g, count: 0}}]}}\n",
        encoding="utf-8",
    )
    result = _run(str(bad))
    assert result.returncode == 1
    assert "spec.devices.requests[0].exactly.count" in result.stdout
