"""What the upgrade scenarios share (``test_upgrade.py``, ``test_seamless_upgrade.py``, and the
tests that roll the installed release to other values): a "new release" of the driver image made
by re-tagging the imported one on every node, ``helm upgrade`` of the driver's release (to a
chart, or to the same chart with some values changed), and the plugin pods of one node (the old
and the new one while the rollout runs).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from dra_e2e.chart import set_args
from dra_e2e.handle import ClusterHandle
from driver_support import CHART, Driver, helm_path, run_helm

#: The driver image as the harness imports it into the nodes (no registry).
REPOSITORY = "docker.io/library/dra-driver-nvidia-gpu-py"


def retag_driver_image(cluster: ClusterHandle, nodes: Sequence[str], tag: str) -> None:
    """Give the imported driver image (the chart's appVersion) the tag ``tag`` on every node, so
    that a release with ``image.tag=TAG`` replaces the plugin pods as a new image does.

    Needs the local e2e cluster (``ctr`` on each node's containerd socket).
    """
    if cluster.local is None:
        raise RuntimeError("re-tagging the image on the nodes needs the local e2e cluster")
    app_version = str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])
    statuses = cluster.local.status()["nodes"]
    for node in nodes:
        subprocess.run(
            [
                str(cluster.local.bins.ctr), "--address", str(statuses[node]["containerd_socket"]),
                "--namespace", "k8s.io", "images", "tag", "--force",
                f"{REPOSITORY}:{app_version}", f"{REPOSITORY}:{tag}",
            ],
            capture_output=True, text=True, check=True,
        )  # fmt: skip


def helm_upgrade(driver: Driver, chart: Path, *args: str, timeout: str = "5m") -> str:
    """``helm upgrade`` of the driver's release to ``chart`` (``ARGS`` added: values,
    ``--install``), waiting up to ``timeout`` (Helm's duration) for the rollout; returns Helm's
    output (the chart's notes)."""
    return run_helm(
        helm_path(),
        "upgrade", driver.release, str(chart), "--namespace", driver.namespace,
        "--wait", "--timeout", timeout, *args,
        env={**os.environ, "KUBECONFIG": str(driver.cluster.kubeconfig)},
    )  # fmt: skip


def upgrade_reusing_values(
    driver: Driver, values: Mapping[str, str], *, timeout: str = "5m"
) -> str:
    """``helm upgrade --reuse-values`` of the driver's release to this checkout's chart with
    ``values`` (``--set KEY=VALUE`` each) on top of the installed ones, waiting up to
    ``timeout`` for the rollout; returns Helm's output (the chart's notes)."""
    return helm_upgrade(driver, CHART, "--reuse-values", *set_args(values), timeout=timeout)


def plugin_pods_on(driver: Driver, node: str) -> list[dict[str, Any]]:
    """The driver's kubelet plugin pods on ``node`` (two while a surge rollout overlaps them)."""
    return [p for p in driver.plugin_pods() if p["spec"].get("nodeName") == node]
