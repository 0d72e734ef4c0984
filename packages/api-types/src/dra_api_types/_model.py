"""Base classes of every model: API-shaped serialization and strict/lenient parsing."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, get_args, get_origin

import pydantic
from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

from .errors import ObjectRef, ValidationError
from .quantity import Quantity
from .semver import Version
from .spelling import closest_name

__all__ = [
    "ApiModel",
    "ApiObject",
    "StrictApiModel",
    "apply_validation",
    "dump_value",
    "install_validator",
]

# The kube-apiserver rules of dra_api_types.validation. They need every model, so they sit
# above this module and install their entry point here (once, when the package is imported)
# rather than being imported by it.
_validators: list[Callable[[ApiModel], None]] = []


def install_validator(check: Callable[[ApiModel], None]) -> None:
    """Make ``from_dict(validate=True)`` and the CRs' ``validate()`` run ``check``."""
    _validators[:] = [check]


def apply_validation(obj: ApiModel) -> None:
    """Raise the first rule ``obj`` breaks, as the installed validator reports it."""
    if not _validators:
        raise RuntimeError("dra_api_types.validation has not installed its rules")
    for check in _validators:
        check(obj)


class ApiModel(BaseModel):
    """A lenient model of an API type: unknown fields are kept and written back unchanged.

    Used for everything read from a server, so a newer apiserver's fields survive a
    read-modify-write round trip.
    """

    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        alias_generator=to_camel,
        strict=True,
        validate_default=False,
        revalidate_instances="never",
        # Build each model's validator on its first use, not at import: a process uses a
        # few of the API's models, and building them all cost ~3 MB at start (docs/scale.md).
        # Safe under threads from pydantic 2.14 on (its rebuild takes a lock; pinned in
        # pyproject): before, a concurrent first use could validate with the parent's rules.
        defer_build=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        """Treat ``null`` for a known field as unset, as Go's JSON decoder does.

        ``kubectl create --dry-run=client -o yaml`` writes ``creationTimestamp: null``;
        unknown fields keep their nulls so they are written back unchanged.
        """
        if isinstance(data, dict) and None in data.values():
            known = _known_keys(cls)
            return {k: v for k, v in data.items() if v is not None or k not in known}
        return data

    def to_dict(self) -> dict[str, Any]:
        """The object as API JSON: camelCase keys, unset fields omitted, unknown fields kept."""
        return _dump_model(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, validate: bool = False) -> Self:
        """Build the model from API JSON.

        Structural errors (a wrong type, a malformed quantity, an unknown field in a strict
        model) raise :class:`~dra_api_types.errors.ValidationError` naming the field path.
        With ``validate=True`` the kube-apiserver rules are checked too.
        """
        if not isinstance(data, Mapping):
            raise ValidationError("", f"expected a mapping, got {type(data).__name__}")
        try:
            obj = cls.model_validate(dict(data))
        except pydantic.ValidationError as exc:
            raise _convert_error(cls, exc, _ref_of(data)) from None
        if validate:
            apply_validation(obj)
        return obj

    def copy_deep(self) -> Self:
        """A deep copy (nested models, lists and unknown fields included)."""
        return self.model_copy(deep=True)


class StrictApiModel(ApiModel):
    """A model of something users write: unknown fields are an error naming the field."""

    model_config = ConfigDict(extra="forbid")


class ApiObject(ApiModel):
    """A top-level kind: ``apiVersion`` and ``kind`` are always written."""

    API_VERSION: ClassVar[str] = ""
    KIND: ClassVar[str] = ""
    #: REST resource name (``resourceclaims``) and whether objects live in a namespace.
    PLURAL: ClassVar[str] = ""
    NAMESPACED: ClassVar[bool] = False

    def to_dict(self) -> dict[str, Any]:
        """The object as API JSON, starting with apiVersion and kind."""
        body = _dump_model(self)
        body.pop("apiVersion", None)
        body.pop("kind", None)
        api_version = getattr(self, "api_version", None) or self.API_VERSION
        kind = getattr(self, "kind", None) or self.KIND
        return {"apiVersion": api_version, "kind": kind, **body}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, validate: bool = False) -> Self:
        """Build the object from API JSON; apiVersion and kind, when present, must match."""
        if isinstance(data, Mapping):
            ref = _ref_of(data)
            for key, expected in (("apiVersion", cls.API_VERSION), ("kind", cls.KIND)):
                value = data.get(key)
                if value is not None and value != expected:
                    raise ValidationError(
                        key, f"expected {expected!r}, got {value!r}", object_ref=ref
                    )
        return super().from_dict(data, validate=validate)

    def object_ref(self) -> ObjectRef:
        """Kind, namespace and name of this object, for error messages and logs."""
        meta = getattr(self, "metadata", None)
        return ObjectRef(
            kind=self.KIND,
            name=(getattr(meta, "name", None) or "") if meta is not None else "",
            namespace=(getattr(meta, "namespace", None) or "") if meta is not None else "",
            api_version=self.API_VERSION,
        )


def dump_value(value: Any) -> Any:
    """Serialize a model, Quantity, Version, list or mapping into plain JSON values."""
    if isinstance(value, ApiModel):
        return value.to_dict()
    if isinstance(value, Quantity | Version):
        return str(value)
    if isinstance(value, list | tuple):
        return [dump_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: dump_value(v) for k, v in value.items()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return copy.deepcopy(value)


def _dump_model(model: ApiModel) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fields_set = model.model_fields_set
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if value is None:
            continue
        dumped = dump_value(value)
        if name not in fields_set and not info.is_required():
            default = info.get_default(call_default_factory=True)
            if dumped == dump_value(default):
                continue
        out[info.alias or name] = dumped
    if model.model_extra:
        for key, value in model.model_extra.items():
            out[key] = dump_value(value)
    return out


_KNOWN_KEYS: dict[type[BaseModel], frozenset[str]] = {}


def _known_keys(model: type[BaseModel]) -> frozenset[str]:
    keys = _KNOWN_KEYS.get(model)
    if keys is None:
        names = set(model.model_fields)
        names |= {info.alias for info in model.model_fields.values() if info.alias}
        keys = _KNOWN_KEYS[model] = frozenset(names)
    return keys


def _ref_of(data: Mapping[str, Any]) -> ObjectRef:
    meta = data.get("metadata")
    name = namespace = ""
    if isinstance(meta, Mapping):
        name = str(meta.get("name") or "")
        namespace = str(meta.get("namespace") or "")
    kind = data.get("kind")
    api_version = data.get("apiVersion")
    return ObjectRef(
        kind=kind if isinstance(kind, str) else "",
        name=name,
        namespace=namespace,
        api_version=api_version if isinstance(api_version, str) else "",
    )


def _convert_error(
    model: type[BaseModel], exc: pydantic.ValidationError, ref: ObjectRef
) -> ValidationError:
    first = exc.errors(include_url=False)[0]
    loc = first["loc"]
    path = format_loc(model, loc)
    kind = first["type"]
    if kind == "extra_forbidden":
        message = f"unknown field {str(loc[-1])!r}"
        parent = _model_at(model, loc[:-1])
        names = (
            [info.alias or name for name, info in parent.model_fields.items()]
            if parent is not None
            else []
        )
        close = closest_name(str(loc[-1]), names)
        if close is not None:
            message += f" (did you mean {close!r}?)"
    elif kind == "missing":
        message = "required value"
    else:
        message = first["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
    return ValidationError(path, message, object_ref=ref)


def format_loc(model: type[BaseModel] | None, loc: tuple[int | str, ...]) -> str:
    """Format a pydantic error location as an API field path.

    Walks the model's field types so map keys are written ``["key"]`` and list indexes
    ``[3]``, as in ``spec.devices[3].attributes["gpu.nvidia.com/uuid"]``.
    """
    path = ""
    current: Any = model
    for item in loc:
        origin = get_origin(current)
        args = get_args(current)
        if origin is not None and type(None) in args:
            non_none = [a for a in args if a is not type(None)]
            current = non_none[0] if len(non_none) == 1 else None
            origin, args = get_origin(current), get_args(current)
        if isinstance(item, int):
            path += f"[{item}]"
            current = args[0] if origin is list and args else None
        elif origin is dict or (origin is not None and origin is Mapping):
            path += f'["{item}"]'
            current = args[1] if len(args) == 2 else None
        elif isinstance(current, type) and issubclass(current, BaseModel):
            info = _field_by_alias(current, item)
            segment = info[0] if info else item
            path = f"{path}.{segment}" if path else segment
            current = info[1] if info else None
        else:
            segment = str(item)
            if segment.startswith("function-"):
                continue
            path = f"{path}.{segment}" if path else segment
            current = None
    return path


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model of the object at ``loc`` (a pydantic error location), or None."""
    current: Any = model
    for item in loc:
        origin, args = get_origin(current), get_args(current)
        if origin is not None and type(None) in args:
            non_none = [a for a in args if a is not type(None)]
            current = non_none[0] if len(non_none) == 1 else None
            origin, args = get_origin(current), get_args(current)
        if isinstance(item, int):
            current = args[0] if origin is list and args else None
        elif origin is dict:
            current = args[1] if len(args) == 2 else None
        elif isinstance(current, type) and issubclass(current, BaseModel):
            info = _field_by_alias(current, item)
            current = info[1] if info else None
        elif not str(item).startswith("function-"):
            current = None
    origin, args = get_origin(current), get_args(current)
    if origin is not None and type(None) in args:
        non_none = [a for a in args if a is not type(None)]
        current = non_none[0] if len(non_none) == 1 else None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _field_by_alias(model: type[BaseModel], key: str) -> tuple[str, Any] | None:
    for name, info in model.model_fields.items():
        if key in (info.alias, name):
            return info.alias or name, info.annotation
    return None
