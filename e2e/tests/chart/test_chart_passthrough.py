"""The chart's passthrough mounts: the host's /sys, /proc and /dev/vfio (never its root), only
with PassthroughSupport."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_helpers import BASE_SETS, CHART, NAMESPACE, run_helm, set_args


def _plugin(helm: Path, sets: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    args = ["template", "dra", str(CHART), "--namespace", NAMESPACE]
    out = run_helm(helm, *args, *set_args({**BASE_SETS, **sets}))
    ds = next(
        d
        for d in yaml.safe_load_all(out)
        if d and d["kind"] == "DaemonSet" and d["metadata"]["name"].endswith("kubelet-plugin")
    )
    pod = ds["spec"]["template"]["spec"]
    gpus = next(c for c in pod["containers"] if c["name"] == "gpus")
    return pod, gpus


def _host_paths(pod: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}


PASSTHROUGH = {"featureGates.PassthroughSupport": "true", "featureGates.DeviceMetadata": "true"}


def test_passthrough_mounts_the_host_sys_proc_and_vfio_nodes(helm: Path) -> None:
    pod, gpus = _plugin(helm, PASSTHROUGH)
    paths = _host_paths(pod)
    assert (paths["host-sys"], paths["host-proc"], paths["host-vfio"]) == (
        "/sys",
        "/proc",
        "/dev/vfio",
    )
    mounts = {m["name"]: m for m in gpus["volumeMounts"]}
    assert mounts["host-sys"]["mountPath"] == "/sys"
    assert "readOnly" not in mounts["host-sys"], "binding drivers writes to sysfs"
    assert mounts["host-proc"] == {"name": "host-proc", "mountPath": "/host-proc", "readOnly": True}
    assert mounts["host-vfio"] == {"name": "host-vfio", "mountPath": "/host-vfio", "readOnly": True}
    for arg in ("--sysfs-root=/sys", "--proc-root=/host-proc", "--vfio-dir=/host-vfio"):
        assert arg in gpus["args"]
    # The GPU nodes' checks keep the container's own /dev, as without passthrough.
    assert not any(a.startswith("--dev-root") for a in gpus["args"])
    assert "--feature-gates=DeviceMetadata=true,PassthroughSupport=true" in gpus["args"]
    assert gpus["securityContext"] == {"privileged": True}


@pytest.mark.parametrize("compute_domains", ["true", "false"])
def test_passthrough_mounts_no_host_root(helm: Path, compute_domains: str) -> None:
    # With the driver elsewhere than / (the GPU Operator's), nothing mounts the host's root.
    sets = {
        **PASSTHROUGH,
        "nvidiaDriverRoot": "/run/nvidia/driver",
        "resources.computeDomains.enabled": compute_domains,
    }
    pod, gpus = _plugin(helm, sets)
    assert "/" not in _host_paths(pod).values()
    assert "/host-root" not in {m["mountPath"] for m in gpus["volumeMounts"]}
    # A host-installed driver (nvidiaDriverRoot /) is the driver root's mount, read-only at
    # /driver-root as without passthrough; passthrough adds no mount of / of its own.
    pod, gpus = _plugin(helm, PASSTHROUGH)
    assert [n for n, p in _host_paths(pod).items() if p == "/"] == ["driver-root"]
    (root,) = [m for m in gpus["volumeMounts"] if m["name"] == "driver-root"]
    assert (root["mountPath"], root["readOnly"]) == ("/driver-root", True)


@pytest.mark.parametrize(
    "sets",
    [
        {},
        {"featureGates.PassthroughSupport": "false"},
        # The fake backend keeps its fake host tree in the plugin directory.
        {"devices.backend": "fake", "featureGates.PassthroughSupport": "true"},
    ],
)
def test_no_host_mounts_without_the_gate(helm: Path, sets: dict[str, str]) -> None:
    pod, gpus = _plugin(helm, sets)
    assert not {"host-sys", "host-proc", "host-vfio"} & set(_host_paths(pod))
    assert not any(
        a.startswith(("--sysfs-root", "--proc-root", "--vfio-dir")) for a in gpus["args"]
    )
