"""What the sharing scenarios share: the pods of a namespace with their logs, and the fake
node's GPU state on the host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dra_e2e.handle import ClusterHandle
from driver_support import Driver, wait_running

__all__ = ["fake_gpu_state", "logs_of", "running_pods"]


def running_pods(cluster: ClusterHandle, namespace: str, count: int) -> list[str]:
    """Names of the namespace's pods once ``count`` exist and all of them run."""
    names: list[str] = cluster.wait_until(
        f"{count} pods in {namespace}",
        lambda: (
            [
                p["metadata"]["name"]
                for p in cluster.kubectl_json("get", "pods", "-n", namespace)["items"]
            ]
            if len(cluster.kubectl_json("get", "pods", "-n", namespace)["items"]) >= count
            else []
        ),
        timeout=120,
        interval=2,
    )
    for name in names:
        wait_running(cluster, name, namespace)
    return sorted(names)


def logs_of(cluster: ClusterHandle, pod: str, namespace: str, container: str, needle: str) -> str:
    """The container's log once it contains ``needle``."""
    return str(
        cluster.wait_until(
            f"{needle!r} in the log of {namespace}/{pod}/{container}",
            lambda: (
                log
                if needle in (log := cluster.kubectl("logs", pod, "-n", namespace, "-c", container))
                else ""
            ),
            timeout=60,
            interval=1,
        )
    )


def fake_gpu_state(driver: Driver, node: str) -> dict[str, Any]:
    """GPU UUID -> the fake GPU's recorded state (compute mode, time-slice, instances)."""
    path = Path(driver.plugin_dir(node)) / "fake-gpus.json"
    doc = json.loads(path.read_text())
    return {g["uuid"]: g for g in doc["gpus"]}
