"""The named formats of the Kubernetes format library and their validators.

Messages follow Kubernetes' apimachinery validators (DNS labels and subdomains,
qualified names, label values) or say briefly what is wrong (uri, uuid, byte, date,
datetime).
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Callable
from datetime import date
from typing import Final

from .errors import CelRuntimeError
from .temporal import Timestamp
from .urls import parse_url

FORMAT_TYPE: Final = "kubernetes.NamedFormat"

_LABEL: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_1035: Final = "[a-z]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN: Final = rf"{_LABEL}(\.{_LABEL})*"
_NAME: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"


def _pattern(regex: str, *, max_length: int, what: str, example: str) -> Callable[[str], list[str]]:
    compiled = re.compile(regex)

    def check(value: str) -> list[str]:
        problems = []
        if len(value) > max_length:
            problems.append(f"must be no more than {max_length} characters")
        if not compiled.fullmatch(value):
            problems.append(f"{what} (e.g. {example}, regex used for validation is '{regex}')")
        return problems

    return check


_dns1123_label = _pattern(
    _LABEL,
    max_length=63,
    what="a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
    "'-', and must start and end with an alphanumeric character",
    example="'my-name',  or '123-abc'",
)
_dns1123_subdomain = _pattern(
    _SUBDOMAIN,
    max_length=253,
    what="a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character",
    example="'example.com'",
)
_dns1035_label = _pattern(
    _LABEL_1035,
    max_length=63,
    what="a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
    "with an alphabetic character, and end with an alphanumeric character",
    example="'my-name',  or 'abc-123'",
)
_name_part = _pattern(
    _NAME,
    max_length=63,
    what="name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character",
    example="'MyName',  or 'my.name',  or '123-abc'",
)


def _qualified_name(value: str) -> list[str]:
    prefix, slash, name = value.rpartition("/")
    if slash and not prefix:
        return ["prefix part must be non-empty"]
    problems = [f"prefix part {p}" for p in _dns1123_subdomain(prefix)] if slash else []
    if not name:
        return [*problems, "name part must be non-empty"]
    return problems + _name_part(name)


def _label_value(value: str) -> list[str]:
    return [] if value == "" else _name_part(value)


def _prefix(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    # generateName-style prefixes may end with "-"; validate as if it were completed.
    def check_prefix(value: str) -> list[str]:
        return check(value[:-1] + "a" if value.endswith("-") else value)

    return check_prefix


def _uri(value: str) -> list[str]:
    try:
        parse_url(value)
    except CelRuntimeError as err:
        return [err.message]
    return []


def _uuid(value: str) -> list[str]:
    try:
        uuid.UUID(value)
    except ValueError:
        return ["does not match the UUID format"]
    return []


def _byte(value: str) -> list[str]:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return ["invalid base64"]
    return []


def _date(value: str) -> list[str]:
    try:
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise ValueError(value)
        date.fromisoformat(value)
    except ValueError:
        return ["invalid date"]
    return []


def _datetime(value: str) -> list[str]:
    try:
        Timestamp.parse(value)
    except CelRuntimeError:
        return ["invalid datetime"]
    return []


FORMATS: Final[dict[str, Callable[[str], list[str]]]] = {
    "dns1123Label": _dns1123_label,
    "dns1123Subdomain": _dns1123_subdomain,
    "dns1035Label": _dns1035_label,
    "qualifiedName": _qualified_name,
    "dns1123LabelPrefix": _prefix(_dns1123_label),
    "dns1123SubdomainPrefix": _prefix(_dns1123_subdomain),
    "dns1035LabelPrefix": _prefix(_dns1035_label),
    "labelValue": _label_value,
    "uri": _uri,
    "uuid": _uuid,
    "byte": _byte,
    "date": _date,
    "datetime": _datetime,
}


class NamedFormat:
    """A ``kubernetes.NamedFormat`` value: one of :data:`FORMATS`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedFormat) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def problems(self, value: str) -> list[str]:
        """What is wrong with ``value`` in this format (empty when it is valid)."""
        return FORMATS[self.name](value)
