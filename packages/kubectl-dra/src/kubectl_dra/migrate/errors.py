"""Errors and notes of ``kubectl dra migrate``."""

from __future__ import annotations

from dataclasses import dataclass


class MigrationError(Exception):
    """A legacy object cannot be expressed on ``resource.k8s.io/v1``: names object and field."""

    def __init__(self, message: str, *, object_ref: str, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.object_ref = object_ref
        self.field = field

    def __str__(self) -> str:
        field = f" {self.field}:" if self.field else ""
        return f"{self.object_ref}:{field} {self.message}"


class MissingConfigError(MigrationError):
    """A ``parametersRef`` names an NvidiaGPUConfig the input does not hold (``key``: its
    name and namespace), or holds only in a form that could not be read."""

    def __init__(self, message: str, *, object_ref: str, field: str, key: tuple[str, str]) -> None:
        super().__init__(message, object_ref=object_ref, field=field)
        self.key = key


@dataclass(frozen=True, slots=True)
class Note:
    """One decision the migration took, about one object."""

    where: str
    object_ref: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.object_ref}: {self.message}"
