"""Errors raised by dra_api_types.

Exception tree::

    DraApiTypesError
     +-- QuantityError (also ValueError)      a string is not a Kubernetes quantity
     +-- VersionError (also ValueError)       a string is not a semantic version 2.0.0
 +-- FeatureGateError (also ValueError)   a --feature-gates value is malformed, names an
 |                                        unknown gate or breaks a dependency rule; carries
 |                                        .setting (the flag)
     +-- ValidationError (also ValueError)    an object breaks an API rule; carries .path and
     |                                        .object_ref
     +-- UnknownKindError (ValidationError)   apiVersion/kind this package does not model in a
                                              group it owns
"""

from __future__ import annotations

from dataclasses import dataclass


class DraApiTypesError(Exception):
    """Base class of every error raised by this package."""


class QuantityError(DraApiTypesError, ValueError):
    """A string or number could not be parsed as a Kubernetes resource.Quantity."""


class VersionError(DraApiTypesError, ValueError):
    """A string is not a strict semantic version (semver.org 2.0.0)."""


class FeatureGateError(DraApiTypesError, ValueError):
    """A feature-gate setting is invalid; the message starts with the flag it came from.

    Lives here, beside the gate table, so every component (kubelet plugins, controller,
    webhook) can refuse a bad ``--feature-gates`` without depending on the kubelet core.
    """

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"{setting}: {message}")
        self.setting = setting
        self.message = message


@dataclass(frozen=True, kw_only=True)
class ObjectRef:
    """The identity of the object an error is about (any part may be unknown)."""

    kind: str = ""
    name: str = ""
    namespace: str = ""
    api_version: str = ""

    def __str__(self) -> str:
        name = f"{self.namespace}/{self.name}" if self.namespace else self.name
        kind = self.kind or "object"
        return f"{kind} {name!r}" if name else kind


class ValidationError(DraApiTypesError, ValueError):
    """An object breaks an API rule.

    ``path`` is the field path in API (camelCase) spelling, for example
    ``spec.devices[3].attributes["gpu.nvidia.com/uuid"]``; ``object_ref`` names the object.
    """

    def __init__(self, path: str, message: str, *, object_ref: ObjectRef | None = None) -> None:
        self.path = path
        self.message = message
        self.object_ref = object_ref or ObjectRef()
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"{self.object_ref}: " if (self.object_ref.kind or self.object_ref.name) else ""
        field = f"{self.path}: " if self.path else ""
        return f"{where}{field}{self.message}"

    def with_object(self, object_ref: ObjectRef, *, prefix: str = "") -> ValidationError:
        """Return a copy bound to ``object_ref``, with ``prefix`` prepended to the path."""
        path = _join(prefix, self.path)
        return type(self)(path, self.message, object_ref=object_ref)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.path, self.message, self.object_ref))


def _rebuild(
    cls: type[ValidationError], path: str, message: str, object_ref: ObjectRef
) -> ValidationError:
    return cls(path, message, object_ref=object_ref)


class UnknownKindError(ValidationError):
    """An apiVersion/kind in a group this package owns that has no model here."""


def _join(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    if path.startswith("["):
        return prefix + path
    return f"{prefix}.{path}"
