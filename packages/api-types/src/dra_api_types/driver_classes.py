"""The DeviceClasses this driver installs (the chart's ``templates/deviceclasses.yaml``), as
``resource.k8s.io/v1`` objects: the one list offline tools use when the input has none.

The chart renders the same classes with Helm; ``e2e/tests/chart/test_chart.py`` checks that
its output equals :func:`driver_device_classes`, so the two cannot drift.

Example::

    from dra_api_types.driver_classes import driver_device_class

    gpu = driver_device_class("gpu.nvidia.com")
    assert gpu is not None and gpu["spec"]["extendedResourceName"] == "nvidia.com/gpu"
"""

from __future__ import annotations

import copy
from typing import Any, Final

_GPU = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{}'"
_CD = (
    "device.driver == 'compute-domain.nvidia.com' && "
    "device.attributes['compute-domain.nvidia.com'].type == '{}'"
)


def _class(name: str, expression: str, **spec: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}], **spec},
    }


# In the chart's order: the GPU classes, then the compute-domain ones.
_CLASSES: Final = (
    _class("gpu.nvidia.com", _GPU.format("gpu"), extendedResourceName="nvidia.com/gpu"),
    _class("mig.nvidia.com", _GPU.format("mig")),
    _class("vfio.gpu.nvidia.com", _GPU.format("vfio")),
    _class("compute-domain-daemon.nvidia.com", _CD.format("daemon")),
    _class(
        "compute-domain-default-channel.nvidia.com",
        _CD.format("channel") + " && device.attributes['compute-domain.nvidia.com'].id == 0",
    ),
)

#: The names of the DeviceClasses the chart installs for this driver.
DRIVER_DEVICE_CLASSES: Final = frozenset(str(c["metadata"]["name"]) for c in _CLASSES)


def driver_device_classes() -> list[dict[str, Any]]:
    """Every DeviceClass the chart installs (``resource.k8s.io/v1`` JSON, fresh copies)."""
    return copy.deepcopy(list(_CLASSES))


def driver_device_class(name: str) -> dict[str, Any] | None:
    """The chart's DeviceClass ``name`` (a fresh copy), or None if the chart has none."""
    return next((c for c in driver_device_classes() if c["metadata"]["name"] == name), None)


__all__ = ["DRIVER_DEVICE_CLASSES", "driver_device_class", "driver_device_classes"]
