"""Seamless plugin upgrades in the chart: the kubelet plugin DaemonSet surges (a new pod next
to the old one on each node) with per-instance socket names, NVIDIA's values keep NVIDIA's
all-at-once rollout, and the classic socket names (kubelets before 1.33) refuse to surge."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chart_helpers import OWN_IMAGE, HelmFailed, daemonset, plugin_pod
from chart_render import NVIDIA_VALUES, render_objects

SURGE = "kubeletPlugin.updateStrategy.rollingUpdate.maxSurge"
UNAVAILABLE = "kubeletPlugin.updateStrategy.rollingUpdate.maxUnavailable"
BOTH_PLUGINS = {"resources.computeDomains.enabled": "true"}


def _pod_uid_env(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """Container name -> its POD_UID env entry (absent: no entry)."""
    containers = plugin_pod(objects)["containers"]
    return {c["name"]: e for c in containers for e in c.get("env", []) if e["name"] == "POD_UID"}


def test_default_is_a_surge_rollout_with_per_instance_sockets_in_both_plugins(
    helm: Path,
) -> None:
    objects = render_objects(helm, sets=BOTH_PLUGINS)
    assert daemonset(objects)["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    downward = {"valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}
    env = _pod_uid_env(objects)
    assert sorted(env) == ["compute-domains", "gpus"]
    for entry in env.values():
        assert entry == {"name": "POD_UID", **downward}


def test_nvidias_values_keep_nvidias_all_at_once_rollout(helm: Path) -> None:
    # NVIDIA's values name NVIDIA's image, which the chart refuses: our image, the rest theirs.
    objects = render_objects(helm, {"image.repository": OWN_IMAGE}, values=[NVIDIA_VALUES])
    assert daemonset(objects)["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "100%"},
    }


@pytest.mark.parametrize(
    ("sets", "rolling"),
    [
        ({UNAVAILABLE: "1"}, {"maxUnavailable": 1}),
        ({SURGE: "2"}, {"maxSurge": 2, "maxUnavailable": 0}),
        ({SURGE: "0", UNAVAILABLE: "25%"}, {"maxUnavailable": "25%"}),
    ],
)
def test_only_one_of_surge_and_unavailable_is_non_zero(
    helm: Path, sets: dict[str, str], rolling: dict[str, Any]
) -> None:
    strategy = daemonset(render_objects(helm, sets=sets))["spec"]["updateStrategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": rolling}


def test_on_delete_has_no_rolling_update(helm: Path) -> None:
    objects = render_objects(helm, sets={"kubeletPlugin.updateStrategy.type": "OnDelete"})
    assert daemonset(objects)["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_classic_socket_names_for_old_kubelets_pass_no_pod_uid(helm: Path) -> None:
    objects = render_objects(
        helm,
        sets={
            **BOTH_PLUGINS,
            "kubeletPlugin.perInstanceSockets": "false",
            SURGE: "0",
            UNAVAILABLE: "1",
        },
    )
    assert _pod_uid_env(objects) == {}
    assert daemonset(objects)["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 1}


def test_classic_socket_names_refuse_a_surge(helm: Path) -> None:
    with pytest.raises(HelmFailed, match=r"maxSurge=1 runs an old and a new plugin pod"):
        render_objects(helm, sets={"kubeletPlugin.perInstanceSockets": "false"})


def test_per_instance_sockets_must_be_a_boolean(helm: Path) -> None:
    with pytest.raises(HelmFailed, match="perInstanceSockets"):
        render_objects(helm, sets={"kubeletPlugin.perInstanceSockets": "sometimes"})
