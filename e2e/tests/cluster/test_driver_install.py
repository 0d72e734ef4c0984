"""What ``install-driver`` decides without a cluster: values, overrides, what is still missing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dra_e2e import chart, driver_install
from dra_e2e.driver_install import BadSetError, InstallDriverError


def test_sets_are_key_value_with_the_value_verbatim_and_the_last_winning() -> None:
    sets = driver_install.parse_sets(
        ["devices.fakeGpus={2xA100-40GB,2xL4}", "a.b=x=y", "logVerbosity=4", "logVerbosity=6"]
    )
    assert sets == {
        "devices.fakeGpus": "{2xA100-40GB,2xL4}",
        "a.b": "x=y",
        "logVerbosity": "6",
    }
    assert driver_install.parse_sets(["empty="]) == {"empty": ""}


@pytest.mark.parametrize("item", ["logVerbosity", "=6", ""])
def test_a_set_without_a_key_and_value_is_named(item: str) -> None:
    with pytest.raises(BadSetError, match="is not KEY=VALUE") as caught:
        driver_install.parse_sets([item])
    assert caught.value.item == item


def test_install_values_are_the_local_ones_with_the_overrides_winning() -> None:
    values = driver_install.install_values(
        {"image.pullPolicy": "IfNotPresent", "logVerbosity": "6"}, fake_gpus=("2xL4",)
    )
    assert values["devices.backend"] == "fake"
    assert values["devices.fakeGpus"] == "{2xL4}"
    assert values["image.pullPolicy"] == "IfNotPresent"
    assert values["logVerbosity"] == "6"
    # No paths: every node has the chart's default kubelet and CDI directories.
    assert not [k for k in values if "Directory" in k or "cdiRoot" in k]
    assert "devices.fakeGpus" not in chart.local_values()


def test_install_args_put_values_files_before_the_sets() -> None:
    args = chart.install_args({"a": "1"}, values_files=[Path("x.yaml"), Path("y.yaml")])
    assert args[-4:] == ["--values=x.yaml", "--values=y.yaml", "--set", "a=1"]


def test_a_release_without_the_gpu_plugin_publishes_no_gpu_slices() -> None:
    assert driver_install.publishes_gpus({})
    assert driver_install.publishes_gpus({"resources.gpus.enabled": "true"})
    assert not driver_install.publishes_gpus({"resources.gpus.enabled": "False"})


def _pod(node: str, *, phase: str = "Running", ready: str = "True", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": f"plugin-{node}", **meta},
        "spec": {"nodeName": node},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]},
    }


def test_every_node_needs_a_running_and_ready_plugin_pod() -> None:
    nodes = ["n0", "n1", "n2", "n3"]
    pods = [
        _pod("n0"),
        _pod("n1", ready="False"),
        _pod("n2", phase="Pending", ready="False"),
        _pod("n3", deletionTimestamp="2026-12-01T00:00:00Z"),
    ]
    assert driver_install.nodes_without_ready_plugin(pods, nodes) == ["n1", "n2", "n3"]
    # A surge rollout: the old pod is going, the new one Ready.
    assert driver_install.nodes_without_ready_plugin([*pods, _pod("n3")], ["n3"]) == []


def test_a_pod_that_is_not_ready_says_why() -> None:
    crashing = _pod("n0", ready="False")
    crashing["status"]["containerStatuses"] = [
        {
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"message": "starting\nfake GPU state: holds 8xH100\n"}},
        }
    ]
    pending = _pod("n1", phase="Pending", ready="False")
    assert driver_install.plugin_states([crashing, pending]) == {
        "n0": "CrashLoopBackOff (fake GPU state: holds 8xH100)",
        "n1": "Pending",
    }


def _slice(node: str, driver: str = "gpu.nvidia.com", devices: int = 1) -> dict[str, Any]:
    return {
        "spec": {
            "driver": driver,
            "nodeName": node,
            "devices": [{"name": f"gpu-{i}"} for i in range(devices)],
        }
    }


def test_every_node_needs_a_slice_of_this_driver_with_devices() -> None:
    slices = [
        _slice("n0"),
        _slice("n1", driver="compute-domain.nvidia.com"),
        _slice("n2", devices=0),
    ]
    assert driver_install.nodes_without_slices(slices, ["n0", "n1", "n2", "n3"]) == [
        "n1",
        "n2",
        "n3",
    ]


def test_the_error_names_what_is_missing_and_where() -> None:
    error = InstallDriverError("a Running and Ready kubelet plugin pod", ["n1", "n2"], "after 5s")
    assert str(error) == (
        "install-driver: a Running and Ready kubelet plugin pod missing on n1, n2: after 5s"
    )
    assert error.nodes == ["n1", "n2"]
