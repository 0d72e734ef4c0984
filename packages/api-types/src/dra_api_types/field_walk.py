"""Fields a raw object has that a model does not, compared by exact API spelling.

Kubernetes decodes JSON case-sensitively (``sigs.k8s.io/json``): a key whose spelling differs
from a field's JSON name only in case (``mps_config``, ``Sharing``) is not that field, and a
strict decoder reports it as unknown. The models of this package accept their Python names
too (``populate_by_name``, so code can build them), which would let ``mps_config`` through;
:func:`model_unknown_fields` walks the raw object against the models' JSON names only and
names each field that does not match exactly, by its full path, with the field the user most
likely meant.

Pure logic over decoded JSON.
"""

from __future__ import annotations

import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

from .spelling import closest_name

__all__ = ["STRICT_PREFIX", "StrictFieldError", "api_fields", "model_unknown_fields"]

#: How the API server (and NVIDIA's strict config decoder) starts such an error.
STRICT_PREFIX = "strict decoding error"


@dataclass(frozen=True, slots=True)
class StrictFieldError:
    """One field a strict decoder refuses.

    ``path`` is the field's full path in API spelling; ``meant`` the full path of the known
    field it most likely stands for (its absence then follows from the typo, so findings
    about it are not news), or None.
    """

    path: str
    message: str
    meant: str | None = None


def api_fields(model: type[BaseModel]) -> dict[str, Any]:
    """The model's fields by JSON name (the alias, never the Python name) -> annotation."""
    return {info.alias or name: info.annotation for name, info in model.model_fields.items()}


def model_unknown_fields(
    data: Mapping[str, Any], model: type[BaseModel], path: str = ""
) -> list[StrictFieldError]:
    """Every key of ``data`` (at any depth) that is not exactly a JSON name of ``model``."""
    return list(_walk(data, model, path))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _walk(data: Mapping[str, Any], model: type[BaseModel], path: str) -> Iterator[StrictFieldError]:
    known = api_fields(model)
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
    message = f'{STRICT_PREFIX}: unknown field "{where}"'
    close = closest_name(key, known)
    if close is not None:
        return StrictFieldError(where, f'{message} (did you mean "{close}"?)', _join(parent, close))
    # A field one level too high (v1beta1's request fields in a v1 request belong under
    # ``exactly``): name where it goes.
    for name, annotation in known.items():
        child = _strip_optional(annotation)
        if _is_model(child) and key in api_fields(child):
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
