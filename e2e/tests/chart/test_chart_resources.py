"""The kubelet plugin containers' resources: requests and limits set from the footprint
benchmark (docs/scale.md, "Per-node footprint"), overridable, and NVIDIA's values file keeps
them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chart_helpers import OWN_IMAGE, plugin_pod
from chart_render import NVIDIA_VALUES, render_objects

SETS = {"resources.computeDomains.enabled": "true", "devices.backend": "fake"}


def _container(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (container,) = [c for c in plugin_pod(objects)["containers"] if c["name"] == name]
    return dict(container)


def _mib(quantity: str) -> int:
    assert quantity.endswith("Mi"), quantity
    return int(quantity[:-2])


def test_both_plugin_containers_request_memory_above_their_measured_peak(helm: Path) -> None:
    objects = render_objects(helm, SETS)
    for name in ("gpus", "compute-domains"):
        resources = _container(objects, name)["resources"]
        # Measured: ~69 MB (GPU, 100 prepares) and ~62 MB (CD, idle) peak RSS on the fake
        # backend, ~6 MB more with NVML loaded, and up to ~78 MB before the import cuts: the
        # request must cover the NVML case with room, the limit must exceed the request.
        request = _mib(resources["requests"]["memory"])
        assert request >= 110
        assert _mib(resources["limits"]["memory"]) > request
        assert resources["requests"]["cpu"].endswith("m")
        # No CPU limit: throttling would slow start and prepares.
        assert "cpu" not in resources["limits"]


def test_resources_are_overridable_and_removable(helm: Path) -> None:
    key = "kubeletPlugin.containers.gpus.resources"
    objects = render_objects(helm, {**SETS, f"{key}.requests.memory": "200Mi"})
    assert _container(objects, "gpus")["resources"]["requests"]["memory"] == "200Mi"
    objects = render_objects(helm, {**SETS, key: "null"})
    assert "resources" not in _container(objects, "gpus")
    assert "resources" in _container(objects, "compute-domains")


def test_nvidia_values_file_keeps_the_measured_defaults(helm: Path) -> None:
    """NVIDIA's values say ``resources: {}``: Helm merges an empty map, so the defaults stay."""
    objects = render_objects(helm, {"image.repository": OWN_IMAGE}, values=[NVIDIA_VALUES])
    defaults = render_objects(helm, SETS)
    for name in ("gpus", "compute-domains"):
        assert _container(objects, name)["resources"] == _container(defaults, name)["resources"]
