"""The Kubernetes format library: ``format.<name>().validate(s)`` and ``format.named(n)``.

``validate`` returns ``optional.none()`` for a valid string, otherwise an optional list
of messages.
"""

from __future__ import annotations

from collections.abc import Callable

from .formats import FORMAT_TYPE, FORMATS, NamedFormat
from .overloads import OPTIONAL, define
from .values import NONE, Optional


def _validate(fmt: NamedFormat, value: str) -> Optional:
    problems = fmt.problems(value)
    return Optional(problems) if problems else NONE


def _named(name: str) -> Optional:
    return Optional(NamedFormat(name)) if name in FORMATS else NONE


def _constructor(name: str) -> Callable[[], NamedFormat]:
    def make() -> NamedFormat:
        return NamedFormat(name)

    return make


for _name in FORMATS:
    define(f"format.{_name}", (), FORMAT_TYPE, _constructor(_name), receiver=False)
define("format.named", ("string",), OPTIONAL, _named, receiver=False)
define("validate", (FORMAT_TYPE, "string"), OPTIONAL, _validate)
