"""Strict semantic versions (semver.org 2.0.0), as parsed by blang/semver ``Parse``.

Kubernetes DRA uses this for ``version`` device attributes, so CEL comparisons such as
``device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))`` order
versions by semver precedence.
"""

from __future__ import annotations

from functools import total_ordering
from typing import Any, Final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from .errors import VersionError

__all__ = ["Version"]

_NUMBERS: Final = frozenset("0123456789")
_ALPHANUM: Final = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
_UINT64_MAX: Final = (1 << 64) - 1


def _parse_numeric(part: str, what: str, text: str) -> int:
    if not part:
        raise VersionError(f"version {text!r}: {what} number is empty")
    if not set(part) <= _NUMBERS:
        raise VersionError(f"version {text!r}: invalid character(s) in {what} number {part!r}")
    if len(part) > 1 and part[0] == "0":
        raise VersionError(f"version {text!r}: {what} number {part!r} must not have leading zeros")
    number = int(part)
    if number > _UINT64_MAX:
        raise VersionError(f"version {text!r}: {what} number {part!r} is out of range")
    return number


def _parse_prerelease(part: str, text: str) -> str | int:
    if not part:
        raise VersionError(f"version {text!r}: prerelease identifier is empty")
    if not set(part) <= _ALPHANUM:
        raise VersionError(f"version {text!r}: invalid character(s) in prerelease {part!r}")
    if set(part) <= _NUMBERS:
        if len(part) > 1 and part[0] == "0":
            raise VersionError(
                f"version {text!r}: numeric prerelease {part!r} must not have leading zeros"
            )
        return int(part)
    return part


@total_ordering
class Version:
    """An immutable semantic version; ordering and ``==`` follow semver precedence.

    Build metadata is kept for ``str()`` but ignored by comparison and hashing, as semver
    specifies (``1.0.0+a == 1.0.0+b``).
    """

    __slots__ = ("_build", "_major", "_minor", "_patch", "_pre", "_text")

    _major: int
    _minor: int
    _patch: int
    _pre: tuple[str | int, ...]
    _build: tuple[str, ...]
    _text: str

    def __init__(
        self,
        *,
        major: int,
        minor: int = 0,
        patch: int = 0,
        prerelease: tuple[str | int, ...] = (),
        build: tuple[str, ...] = (),
    ) -> None:
        """Build a version from its parts (validated like parsed ones); see also :meth:`parse`."""
        text = f"{major}.{minor}.{patch}"
        if prerelease:
            text += "-" + ".".join(str(p) for p in prerelease)
        if build:
            text += "+" + ".".join(build)
        parsed = Version.parse(text)
        self._major = parsed._major
        self._minor = parsed._minor
        self._patch = parsed._patch
        self._pre = parsed._pre
        self._build = parsed._build
        self._text = text

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`` strictly (no ``v``, no omitted "
        "parts)."""
        if not isinstance(text, str):
            raise VersionError(f"version must be a string, not {type(text).__name__}")
        if not text:
            raise VersionError("version string is empty")
        rest = text
        build: tuple[str, ...] = ()
        if "+" in rest:
            rest, build_text = rest.split("+", 1)
            parts = build_text.split(".")
            for part in parts:
                if not part:
                    raise VersionError(f"version {text!r}: build identifier is empty")
                if not set(part) <= _ALPHANUM:
                    raise VersionError(f"version {text!r}: invalid character(s) in build {part!r}")
            build = tuple(parts)
        pre: tuple[str | int, ...] = ()
        if "-" in rest:
            rest, pre_text = rest.split("-", 1)
            pre = tuple(_parse_prerelease(p, text) for p in pre_text.split("."))
        numbers = rest.split(".")
        if len(numbers) != 3:
            raise VersionError(f"version {text!r}: must have the form MAJOR.MINOR.PATCH")
        major = _parse_numeric(numbers[0], "major", text)
        minor = _parse_numeric(numbers[1], "minor", text)
        patch = _parse_numeric(numbers[2], "patch", text)
        v = object.__new__(cls)
        v._major, v._minor, v._patch = major, minor, patch
        v._pre, v._build, v._text = pre, build, text
        return v

    @property
    def major(self) -> int:
        """The major number."""
        return self._major

    @property
    def minor(self) -> int:
        """The minor number."""
        return self._minor

    @property
    def patch(self) -> int:
        """The patch number."""
        return self._patch

    @property
    def prerelease(self) -> tuple[str | int, ...]:
        """Prerelease identifiers; numeric ones as int."""
        return self._pre

    @property
    def build(self) -> tuple[str, ...]:
        """Build metadata identifiers."""
        return self._build

    def _key(self) -> tuple[int, int, int]:
        return (self._major, self._minor, self._patch)

    def compare(self, other: Version) -> int:
        """-1, 0 or 1 by semver precedence."""
        if self._key() != other._key():
            return -1 if self._key() < other._key() else 1
        a, b = self._pre, other._pre
        if a == b:
            return 0
        if not a:
            return 1
        if not b:
            return -1
        for x, y in zip(a, b, strict=False):
            if x == y:
                continue
            if isinstance(x, int) and isinstance(y, int):
                return -1 if x < y else 1
            if isinstance(x, int):
                return -1
            if isinstance(y, int):
                return 1
            return -1 if x < y else 1
        return -1 if len(a) < len(b) else (1 if len(a) > len(b) else 0)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.compare(other) == 0

    def __lt__(self, other: Version) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self.compare(other) < 0

    def __hash__(self) -> int:
        return hash((self._key(), self._pre))

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Version({self._text!r})"

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source_type: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _validate_version,
            serialization=core_schema.plain_serializer_function_ser_schema(str, when_used="always"),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {"type": "string"}


def _validate_version(value: object) -> Version:
    if isinstance(value, Version):
        return value
    if not isinstance(value, str):
        raise ValueError(f"version must be a string, not {type(value).__name__}")
    try:
        return Version.parse(value)
    except VersionError as exc:
        raise ValueError(str(exc)) from None
