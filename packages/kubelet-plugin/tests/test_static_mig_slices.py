"""``--print-resource-slices`` on the node of NVIDIA's ``extended-resources_mig-1g-12gb.yaml``:
2x GH200 96GB with 7x 1g.12gb each (mig-parted's ``all-devices`` config), already created when
the plugin starts, published as 14 MIG devices and no whole GPU."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from dra_api_types import ResourceSlice


def test_gh200_spec_node_publishes_its_14_mig_1g_12gb_devices(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "dra_kubelet_plugin",
            "--device-backend",
            "fake",
            "--fake-gpus",
            "2xGH200-96GB:mig=7x1g.12gb",
            "--node-name",
            "gh200-node",
            "--print-resource-slices",
            "--fake-gpu-state-file",
            str(tmp_path / "state.json"),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    (doc,) = list(yaml.safe_load_all(out.stdout))
    ResourceSlice.from_dict(doc, validate=True)
    devices = doc["spec"]["devices"]
    assert len(devices) == 14
    attrs = [d["attributes"] for d in devices]
    assert {a["type"]["string"] for a in attrs} == {"mig"}
    assert {a["profile"]["string"] for a in attrs} == {"1g.12gb"}
    assert {a["productName"]["string"] for a in attrs} == {"NVIDIA GH200 96GB HBM3"}
    assert len({a["uuid"]["string"] for a in attrs}) == 14
    assert len({a["parentUUID"]["string"] for a in attrs}) == 2
    assert [d["name"] for d in devices] == [
        f"gpu-{gpu}-mig-1g12gb-19-{start}" for gpu in (0, 1) for start in range(7)
    ]
    assert {d["capacity"]["memory"]["value"] for d in devices} == {"11Gi"}
