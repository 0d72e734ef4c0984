"""Converting ``resource.k8s.io/v1`` ResourceSlices to ``v1beta2`` and ``v1beta1``.

The inverse of :mod:`.beta_to_v1` for the one kind a driver writes: a plugin builds its
slices as v1 and, on a Kubernetes 1.32 or 1.33 API server that serves only the betas, sends
them in the version the server speaks. ``v1beta2`` has the v1 shape; a ``v1beta1`` device keeps
everything but its name under ``basic``. Pure functions over raw JSON; the input is unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from .beta_to_v1 import BETA_VERSIONS, V1, V1BETA1, _ref
from .errors import ValidationError

__all__ = ["convert_slice_from_v1"]


def _device_v1beta1(device: Any, path: str, data: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(device, Mapping):
        raise ValidationError(path, "must be an object", object_ref=_ref(data))
    basic = {k: v for k, v in device.items() if k != "name"}
    out: dict[str, Any] = {"name": device.get("name")}
    if basic:
        out["basic"] = basic
    return out


def convert_slice_from_v1(data: Mapping[str, Any], api_version: str) -> dict[str, Any]:
    """The ``api_version`` form (``resource.k8s.io/v1beta2`` or ``/v1beta1``; ``/v1`` is a
    copy) of a v1 ResourceSlice.

    Raises :class:`ValidationError` naming the object and field for an object that is not a v1
    ResourceSlice, or an unknown target version.
    """
    if data.get("apiVersion") != V1 or data.get("kind") != "ResourceSlice":
        raise ValidationError("apiVersion", f"not a {V1} ResourceSlice", object_ref=_ref(data))
    if api_version != V1 and api_version not in BETA_VERSIONS:
        raise ValidationError(
            "apiVersion",
            f"cannot convert to {api_version!r} (known: {V1}, {', '.join(BETA_VERSIONS)})",
            object_ref=_ref(data),
        )
    out = copy.deepcopy(dict(data))
    out["apiVersion"] = api_version
    spec = out.get("spec")
    if api_version == V1BETA1 and isinstance(spec, Mapping):
        devices = spec.get("devices")
        if isinstance(devices, list):
            out["spec"] = {
                **spec,
                "devices": [
                    _device_v1beta1(d, f"spec.devices[{i}]", data) for i, d in enumerate(devices)
                ],
            }
    return out
