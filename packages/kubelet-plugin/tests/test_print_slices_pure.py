"""``--print-resource-slices`` only prints: the fake fleet lives in memory (no state file,
so another fleet can be printed next), and an empty device list says why on stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from dra_api_types import ResourceSlice


def _print(tmp_path: Path, fleet: str, *extra: str) -> subprocess.CompletedProcess[str]:
    # TMPDIR and the plugin directory point into tmp_path: anything written would show there.
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dra_kubelet_plugin",
            "--device-backend=fake",
            f"--fake-gpus={fleet}",
            "--node-name=n1",
            f"--kubelet-plugins-directory-path={tmp_path / 'kubelet'}",
            "--print-resource-slices",
            *extra,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=env,
    )


def _device_names(out: str) -> list[str]:
    (doc,) = list(yaml.safe_load_all(out))
    slice_ = ResourceSlice.from_dict(doc, validate=True)
    return [d.name for d in slice_.spec.devices or []]


def test_printing_two_fleets_in_a_row_writes_nothing_and_prints_each(tmp_path: Path) -> None:
    eight = _print(tmp_path, "8xH100-80GB")
    one = _print(tmp_path, "1xH100-80GB")
    assert _device_names(eight.stdout) == [f"gpu-{i}" for i in range(8)]
    assert _device_names(one.stdout) == ["gpu-0"]
    assert eight.stderr == one.stderr == ""
    assert list((tmp_path / "tmp").iterdir()) == []
    assert not (tmp_path / "kubelet").exists()


def test_printing_with_passthrough_removes_its_temporary_host_tree(tmp_path: Path) -> None:
    out = _print(tmp_path, "1xA100-40GB", "--feature-gates=PassthroughSupport=true")
    assert _device_names(out.stdout) == ["gpu-0", "gpu-vfio-0"]
    assert list((tmp_path / "tmp").iterdir()) == []


def test_mig_mode_without_a_layout_says_why_the_device_list_is_empty(tmp_path: Path) -> None:
    out = _print(tmp_path, "2xA100-40GB:mig")
    assert _device_names(out.stdout) == []
    hint = (
        "is in MIG mode without MIG devices, and a GPU in MIG mode is not offered whole: "
        "create MIG devices (fake fleets: a layout, e.g. 'mig=7x1g.5gb') or turn on gate "
        "DynamicMIG"
    )
    assert out.stderr.splitlines() == [
        f"no devices: GPU gpu-{i} (NVIDIA A100-SXM4-40GB) {hint}" for i in (0, 1)
    ]


def test_a_mig_layout_gives_devices_and_no_hint(tmp_path: Path) -> None:
    out = _print(tmp_path, "1xA100-40GB:mig=7x1g.5gb")
    assert len(_device_names(out.stdout)) == 7
    assert out.stderr == ""
