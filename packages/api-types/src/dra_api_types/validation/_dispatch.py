"""Which rules apply to which type: whole objects, lists, nested parts, opaque configs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from .. import nvidia_v1beta1 as nv
from .. import resource_v1 as r
from .._model import ApiModel, ApiObject
from ..errors import ObjectRef, ValidationError
from ..meta_v1 import ObjectMeta
from ._claims import (
    _validate_device_class,
    _validate_resource_claim,
    _validate_resource_claim_template,
)
from ._common import (
    _Errors,
)
from ._compute_domain import (
    _validate_compute_domain,
    _validate_compute_domain_clique,
)
from ._slices import (
    _validate_resource_slice,
)

_VALIDATORS: Final[dict[type[Any], Callable[[_Errors, Any], None]]] = {
    r.DeviceClass: _validate_device_class,
    r.ResourceSlice: _validate_resource_slice,
    r.ResourceClaim: _validate_resource_claim,
    r.ResourceClaimTemplate: _validate_resource_claim_template,
    nv.ComputeDomain: _validate_compute_domain,
    nv.ComputeDomainClique: _validate_compute_domain_clique,
}


def _wrap_device(device: r.Device) -> r.ResourceSlice:
    per_device = bool(device.node_name or device.node_selector is not None or device.all_nodes)
    spec = r.ResourceSliceSpec(
        driver="example.com",
        pool=r.ResourcePool(name="pool", generation=0, resource_slice_count=1),
        devices=[device],
    )
    if per_device:
        spec.per_device_node_selection = True
    else:
        spec.all_nodes = True
    return r.ResourceSlice(metadata=ObjectMeta(name="slice"), spec=spec)


def _wrap_claim(devices: r.DeviceClaim) -> r.ResourceClaim:
    return r.ResourceClaim(
        metadata=ObjectMeta(name="claim"), spec=r.ResourceClaimSpec(devices=devices)
    )


# Nested types are validated inside a minimal valid parent; only their own errors are kept.
_NESTED: Final[dict[type[Any], tuple[Callable[[Any], ApiObject], str]]] = {
    r.ResourceSliceSpec: (
        lambda spec: r.ResourceSlice(metadata=ObjectMeta(name="slice"), spec=spec),
        "spec",
    ),
    r.Device: (_wrap_device, "spec.devices[0]"),
    r.DeviceClassSpec: (
        lambda spec: r.DeviceClass(metadata=ObjectMeta(name="class"), spec=spec),
        "spec",
    ),
    r.ResourceClaimSpec: (
        lambda spec: r.ResourceClaim(metadata=ObjectMeta(name="claim"), spec=spec),
        "spec",
    ),
    r.DeviceClaim: (_wrap_claim, "spec.devices"),
    r.DeviceRequest: (
        lambda request: _wrap_claim(r.DeviceClaim(requests=[request])),
        "spec.devices.requests[0]",
    ),
}


def _nested_errors(obj: ApiModel) -> list[ValidationError] | None:
    entry = _NESTED.get(type(obj))
    if entry is None:
        return None
    wrap, prefix = entry
    ref = ObjectRef(kind=type(obj).__name__)
    found = []
    for error in validation_errors(wrap(obj)):
        if error.path == prefix or error.path.startswith((prefix + ".", prefix + "[")):
            path = error.path[len(prefix) :].lstrip(".")
            found.append(ValidationError(path, error.message, object_ref=ref))
    return found


def _object_ref(obj: ApiModel) -> ObjectRef:
    if isinstance(obj, ApiObject):
        return obj.object_ref()
    kind = getattr(obj, "KIND", "") or type(obj).__name__
    return ObjectRef(kind=kind)


def validation_errors(obj: ApiModel) -> list[ValidationError]:
    """Every rule ``obj`` breaks (empty when valid), each with its field path."""
    ref = _object_ref(obj)
    if isinstance(obj, nv._OpaqueConfig):
        try:
            obj.validate()
        except ValidationError as exc:
            return [ValidationError(exc.path, exc.message, object_ref=ref)]
        return []
    items: Iterable[tuple[str, ApiObject]]
    items_attr = getattr(obj, "items", None)
    if isinstance(obj, ApiObject) and isinstance(items_attr, list):
        items = [(f"items[{i}]", item) for i, item in enumerate(items_attr)]
        errors: list[ValidationError] = []
        for prefix, item in items:
            errors += [
                err.with_object(item.object_ref(), prefix=prefix) for err in validation_errors(item)
            ]
        return errors
    validator = _VALIDATORS.get(type(obj))
    if validator is None:
        nested = _nested_errors(obj)
        if nested is not None:
            return nested
        raise TypeError(f"no API validation for {type(obj).__name__} on its own")
    collected = _Errors()
    validator(collected, obj)
    return [ValidationError(path, message, object_ref=ref) for path, message in collected.items]


def validate(obj: ApiModel) -> None:
    """Raise the first :class:`ValidationError` the kube-apiserver would report for ``obj``."""
    errors = validation_errors(obj)
    if errors:
        raise errors[0]
