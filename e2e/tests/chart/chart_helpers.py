"""Shared helpers of the chart and driver tests: the pinned Helm and the chart's paths (from
``dra_e2e.chart``, which the demo uses too), and the parts of a render the tests look at (the
kubelet plugin's DaemonSet, its pod spec and its ``gpus`` container).

The ``helm`` fixture (the pinned Helm binary, session scoped) comes from ``dra_e2e``'s pytest
plugin, so no test module defines its own.

Imported by name (``import chart_helpers``): the test modules put this directory on
``sys.path``, since ``--import-mode=importlib`` gives them no package to import from. (No
conftest.py here: mypy over all of e2e/tests would see two modules named ``conftest``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dra_e2e.chart import CHART, HELM_WRAPPER, NAMESPACE, HelmFailed, helm_path, run_helm, set_args
from dra_e2e.checkout import REPO

__all__ = [
    "BASE_SETS",
    "CHART",
    "HELM_WRAPPER",
    "NAMESPACE",
    "OWN_IMAGE",
    "REPO",
    "HelmFailed",
    "Render",
    "daemonset",
    "gpus_container",
    "helm_path",
    "plugin_pod",
    "run_helm",
    "set_args",
]

# The values every install of this chart needs; the guards refuse the rest. The default image
# name is published nowhere: renders say it was imported into the nodes, as the harness does.
BASE_SETS: dict[str, str] = {
    "gpuResourcesEnabledOverride": "true",
    "image.allowUnpublishedDefault": "true",
}
# This driver's image in an operator's registry: what an install from NVIDIA's values sets.
OWN_IMAGE = "registry.example.com/dra-driver-nvidia-gpu-py"

Render = Callable[..., list[dict[str, Any]]]


def daemonset(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The render's one DaemonSet (the kubelet plugin); fails unless there is exactly one."""
    (ds,) = [o for o in objects if o["kind"] == "DaemonSet"]
    return dict(ds)


def plugin_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The kubelet plugin's pod spec."""
    return dict(daemonset(objects)["spec"]["template"]["spec"])


def gpus_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The kubelet plugin's ``gpus`` container."""
    (container,) = [c for c in plugin_pod(objects)["containers"] if c["name"] == "gpus"]
    return dict(container)
