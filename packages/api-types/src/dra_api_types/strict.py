"""Strict decoding: unknown and duplicate fields, as the API server reports them.

``kubectl apply`` asks the API server for strict field validation, which refuses an object
with a field its schema does not have (``strict decoding error: unknown field
"spec.devices.requests[0].exactly.selector"``) or a field given twice. The lenient models of
this package keep unknown fields instead (they read what a newer server writes), so a typo
such as ``selector:`` for ``selectors:`` would pass their validation while the API server
refuses it, or worse, would be taken for an absent selector. :func:`unknown_fields` walks a
raw object against the field sets of the models (which ``tests/test_schema_walk.py`` keeps
equal to the upstream OpenAPI schema) and names each unknown field by its full path, with
the known field the user most likely meant (the walk is :mod:`dra_api_types.field_walk`).

Pure logic over decoded JSON.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from . import core_v1
from .codec import registered_kinds
from .field_walk import STRICT_PREFIX, StrictFieldError, model_unknown_fields

__all__ = [
    "StrictFieldError",
    "duplicate_field",
    "pod_unknown_fields",
    "unknown_fields",
]


def duplicate_field(path: str) -> StrictFieldError:
    """The API server's error for a field given twice in one object."""
    return StrictFieldError(path, f'{STRICT_PREFIX}: duplicate field "{path}"')


def unknown_fields(data: Mapping[str, Any]) -> list[StrictFieldError]:
    """Every unknown field of a raw object of a kind this package models (none for others)."""
    cls = registered_kinds().get((str(data.get("apiVersion")), str(data.get("kind"))))
    if cls is None:
        return []
    return model_unknown_fields(data, cls)


def pod_unknown_fields(spec: Mapping[str, Any], path: str) -> list[StrictFieldError]:
    """Unknown fields in the claim references of the pod spec ``spec`` found at ``path``:
    its ``resourceClaims`` entries and its containers' ``resources``."""
    errors: list[StrictFieldError] = []
    for i, entry in _items(spec.get("resourceClaims")):
        errors += model_unknown_fields(
            entry, core_v1.PodResourceClaim, f"{path}.resourceClaims[{i}]"
        )
    for group in core_v1.CONTAINER_GROUPS:
        for i, container in _items(spec.get(group)):
            resources = container.get("resources")
            if isinstance(resources, Mapping):
                where = f"{path}.{group}[{i}].resources"
                errors += model_unknown_fields(resources, core_v1.ResourceRequirements, where)
    return errors


def _items(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        for i, item in enumerate(value):
            if isinstance(item, Mapping):
                yield i, item
