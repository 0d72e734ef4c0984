"""Strict decoding: unknown and duplicate fields, as the API server reports them.

``kubectl apply`` asks the API server for strict field validation, which refuses an object
with a field its schema does not have (``strict decoding error: unknown field
"spec.devices.requests[0].exactly.selector"``) or a field given twice. The lenient models of
this package keep unknown fields instead (they read what a newer server writes), so a typo
such as ``selector:`` for ``selectors:`` would pass their validation while the API server
refuses it, or worse, would be taken for an absent selector. :func:`unknown_fields` walks a
raw object against the field sets of the models (which ``tests/test_schema_walk.py`` keeps
equal to the upstream OpenAPI schema) and names each unknown field by its full path, with
the known field the user most likely meant.

Pure logic over decoded JSON.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from . import core_v1
from .codec import registered_kinds
from .spelling import closest_name

__all__ = [
    "StrictFieldError",
    "duplicate_field",
    "pod_unknown_fields",
    "unknown_fields",
]

_PREFIX = "strict decoding error"


@dataclass(frozen=True, slots=True)
class StrictFieldError:
    """One field the API server's strict decoding refuses.

    ``path`` is the field's full path in API spelling; ``meant`` the full path of the known
    field it most likely stands for (its absence then follows from the typo, so findings
    about it are not news), or None.
    """

    path: str
    message: str
    meant: str | None = None


def duplicate_field(path: str) -> StrictFieldError:
    """The API server's error for a field given twice in one object."""
    return StrictFieldError(path, f'{_PREFIX}: duplicate field "{path}"')


def unknown_fields(data: Mapping[str, Any]) -> list[StrictFieldError]:
    """Every unknown field of a raw object of a kind this package models (none for others)."""
    cls = registered_kinds().get((str(data.get("apiVersion")), str(data.get("kind"))))
    if cls is None:
        return []
    return list(_walk(data, cls, ""))


def pod_unknown_fields(spec: Mapping[str, Any], path: str) -> list[StrictFieldError]:
    """Unknown fields in the claim references of the pod spec ``spec`` found at ``path``:
    its ``resourceClaims`` entries and its containers' ``resources``."""
    errors: list[StrictFieldError] = []
    for i, entry in _items(spec.get("resourceClaims")):
        errors += _walk(entry, core_v1.PodResourceClaim, f"{path}.resourceClaims[{i}]")
    for group in core_v1.CONTAINER_GROUPS:
        for i, container in _items(spec.get(group)):
            resources = container.get("resources")
            if isinstance(resources, Mapping):
                where = f"{path}.{group}[{i}].resources"
                errors += _walk(resources, core_v1.ResourceRequirements, where)
    return errors


def _items(value: Any) -> Iterator[tuple[int, Mapping[str, Any]]]:
    if isinstance(value, Sequence) and not isinstance(value, str):
        for i, item in enumerate(value):
            if isinstance(item, Mapping):
                yield i, item


def _fields(model: type[BaseModel]) -> dict[str, Any]:
    """API field name -> annotation."""
    return {info.alias or name: info.annotation for name, info in model.model_fields.items()}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(data: Mapping[str, Any], model: type[BaseModel], path: str) -> Iterator[StrictFieldError]:
    known = _fields(model)
    for key, value in data.items():
        key = str(key)
        where = _join(path, key)
        if key not in known:
            yield _unknown(where, key, known, path)
            continue
        yield from _walk_value(value, known[key], where)


def _walk_value(value: Any, annotation: Any, path: str) -> Iterator[StrictFieldError]:
    annotation = _strip_optional(annotation)
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is list and args and isinstance(value, Sequence) and not isinstance(value, str):
        for i, item in enumerate(value):
            yield from _walk_value(item, args[0], f"{path}[{i}]")
    elif origin is dict and len(args) == 2 and isinstance(value, Mapping):
        for key, item in value.items():
            yield from _walk_value(item, args[1], f'{path}["{key}"]')
    elif _is_model(annotation) and isinstance(value, Mapping):
        yield from _walk(value, annotation, path)


def _unknown(where: str, key: str, known: Mapping[str, Any], parent: str) -> StrictFieldError:
    message = f'{_PREFIX}: unknown field "{where}"'
    close = closest_name(key, known)
    if close is not None:
        return StrictFieldError(where, f'{message} (did you mean "{close}"?)', _join(parent, close))
    # A field one level too high (v1beta1's request fields in a v1 request belong under
    # ``exactly``): name where it goes.
    for name, annotation in known.items():
        child = _strip_optional(annotation)
        if _is_model(child) and key in _fields(child):
            meant = f"{name}.{key}"
            return StrictFieldError(
                where, f'{message} (did you mean "{meant}"?)', _join(parent, meant)
            )
    return StrictFieldError(where, message)


def _strip_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
