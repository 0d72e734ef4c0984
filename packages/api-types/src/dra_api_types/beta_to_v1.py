"""Converting ``resource.k8s.io/v1beta1`` and ``v1beta2`` objects to ``resource.k8s.io/v1``.

Pure functions over raw JSON, like the apiserver's conversion: ``v1beta2`` has the v1
shape; ``v1beta1`` requests keep their fields at the top level (``v1`` moves them under
``exactly`` unless ``firstAvailable`` is used) and ``v1beta1`` devices keep theirs under
``basic``. Unknown fields are kept, so validation of the result reports them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from .errors import ObjectRef, ValidationError

__all__ = ["BETA_VERSIONS", "CONVERTIBLE_KINDS", "V1", "convert_to_v1", "is_convertible_beta"]

V1: Final = "resource.k8s.io/v1"
V1BETA1: Final = "resource.k8s.io/v1beta1"
V1BETA2: Final = "resource.k8s.io/v1beta2"
BETA_VERSIONS: Final = (V1BETA1, V1BETA2)
CONVERTIBLE_KINDS: Final = (
    "DeviceClass",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
)

#: v1beta1 DeviceRequest fields that v1 keeps in ExactDeviceRequest.
_EXACT_FIELDS: Final = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)


def is_convertible_beta(data: Mapping[str, Any]) -> bool:
    """Whether the object is a beta DeviceClass, ResourceClaim(Template) or ResourceSlice."""
    return data.get("apiVersion") in BETA_VERSIONS and data.get("kind") in CONVERTIBLE_KINDS


def _ref(data: Mapping[str, Any]) -> ObjectRef:
    meta = data.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return ObjectRef(
        kind=str(data.get("kind") or ""),
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        api_version=str(data.get("apiVersion") or ""),
    )


def _request_v1beta1(req: Any, path: str, ref: ObjectRef) -> Any:
    if not isinstance(req, Mapping):
        raise ValidationError(path, "must be an object", object_ref=ref)
    if "exactly" in req:
        raise ValidationError(
            f"{path}.exactly", "not a v1beta1 field (this looks like v1)", object_ref=ref
        )
    out: dict[str, Any] = {}
    exact: dict[str, Any] = {}
    for key, value in req.items():
        if key in _EXACT_FIELDS:
            exact[key] = value
        else:
            out[key] = value
    if "firstAvailable" in req:
        if exact:
            # v1 cannot hold both; the apiserver rejects this combination in v1beta1 too.
            raise ValidationError(
                f"{path}.{next(iter(exact))}",
                "must not be set together with firstAvailable",
                object_ref=ref,
            )
        return out
    out["exactly"] = exact
    return out


def _claim_spec_v1beta1(spec: Any, path: str, ref: ObjectRef) -> Any:
    if not isinstance(spec, Mapping):
        return spec
    devices = spec.get("devices")
    if not isinstance(devices, Mapping) or not isinstance(devices.get("requests"), list):
        return dict(spec)
    requests = [
        _request_v1beta1(r, f"{path}.devices.requests[{i}]", ref)
        for i, r in enumerate(devices["requests"])
    ]
    return {**spec, "devices": {**devices, "requests": requests}}


def _slice_spec_v1beta1(spec: Any, path: str, ref: ObjectRef) -> Any:
    if not isinstance(spec, Mapping) or not isinstance(spec.get("devices"), list):
        return spec
    devices = []
    for i, dev in enumerate(spec["devices"]):
        if not isinstance(dev, Mapping):
            raise ValidationError(f"{path}.devices[{i}]", "must be an object", object_ref=ref)
        basic = dev.get("basic")
        flat = {k: v for k, v in dev.items() if k != "basic"}
        if isinstance(basic, Mapping):
            flat.update(basic)
        elif basic is not None:
            raise ValidationError(f"{path}.devices[{i}].basic", "must be an object", object_ref=ref)
        devices.append(flat)
    return {**spec, "devices": devices}


def convert_to_v1(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``resource.k8s.io/v1`` form of a beta object (a new dict; the input is unchanged).

    Raises :class:`ValidationError` naming the object and field if the object is not a
    convertible beta kind or has a shape no version allows.
    """
    ref = _ref(data)
    if not is_convertible_beta(data):
        raise ValidationError(
            "apiVersion", f"not a beta {'/'.join(CONVERTIBLE_KINDS)}", object_ref=ref
        )
    out = copy.deepcopy(dict(data))
    out["apiVersion"] = V1
    if data["apiVersion"] == V1BETA2:
        return out
    kind = data["kind"]
    if kind == "ResourceClaim":
        out["spec"] = _claim_spec_v1beta1(out.get("spec"), "spec", ref)
    elif kind == "ResourceClaimTemplate":
        tmpl = out.get("spec")
        if isinstance(tmpl, Mapping) and "spec" in tmpl:
            out["spec"] = {**tmpl, "spec": _claim_spec_v1beta1(tmpl["spec"], "spec.spec", ref)}
    elif kind == "ResourceSlice":
        out["spec"] = _slice_spec_v1beta1(out.get("spec"), "spec", ref)
    return out
