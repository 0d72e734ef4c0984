"""The attribute and capacity names the ``gpu.nvidia.com`` driver publishes on its devices.

Full GPUs, MIG devices (static and dynamic) and passthrough (VFIO) GPUs each carry a subset;
the union is what a selector can find under ``device.attributes["gpu.nvidia.com"]`` and
``device.capacity["gpu.nvidia.com"]``. The webhook warns about a selector naming anything
else (a typo such as ``productname`` fails on every device: no such key). The kubelet
plugin's tests check that every name it publishes is listed here.

Example::

    from dra_api_types.gpu_attributes import is_published_capacity

    assert is_published_capacity("memorySlice3")
"""

from __future__ import annotations

import re
from typing import Final

from dra_api_types.driver_classes import DRIVER_DEVICE_CLASSES

#: Attribute names in the ``gpu.nvidia.com`` domain.
GPU_ATTRIBUTES: Final = frozenset(
    (
        "addressingMode",
        "architecture",
        "brand",
        "cudaComputeCapability",
        "cudaDriverVersion",
        "deviceID",
        "driverVersion",
        "iommuFDEnabled",
        "parentUUID",
        "productName",
        "profile",
        "type",
        "uuid",
        "vendorID",
    )
)

#: Capacity names in the ``gpu.nvidia.com`` domain (``memorySlice<N>`` besides).
GPU_CAPACITIES: Final = frozenset(
    (
        "addressableMemory",
        "copyEngines",
        "decoders",
        "encoders",
        "jpegEngines",
        "memory",
        "multiprocessors",
        "ofaEngines",
        "shares",
    )
)

_MEMORY_SLICE: Final = re.compile(r"memorySlice[0-9]+")


def is_published_attribute(name: str) -> bool:
    """Whether some ``gpu.nvidia.com`` device carries attribute ``name``."""
    return name in GPU_ATTRIBUTES


def is_published_capacity(name: str) -> bool:
    """Whether some ``gpu.nvidia.com`` device carries capacity ``name``."""
    return name in GPU_CAPACITIES or _MEMORY_SLICE.fullmatch(name) is not None


__all__ = [
    "DRIVER_DEVICE_CLASSES",
    "GPU_ATTRIBUTES",
    "GPU_CAPACITIES",
    "is_published_attribute",
    "is_published_capacity",
]
