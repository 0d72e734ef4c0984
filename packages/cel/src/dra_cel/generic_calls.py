"""The type parameters of the library's generic functions, as cel-go's checker binds them.

The function registry declares kinds (``list``, ``dyn``); cel-go declares ``indexOf`` as
``list(A).indexOf(A) -> int``, ``join`` as ``list(string).join() -> string``, ``first`` as
``list(A).first() -> optional_type(A)``. :func:`generic_result` applies those bindings to
full static types: whether the arguments fit (``[1].join()`` does not) and the full result
type (``[1].first()`` is ``optional_type(int)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .static_types import (
    FREE,
    assignable,
    element,
    is_wildcard,
    kind,
    list_of,
    most_general,
    optional_of,
    params,
)


def _elem(t: str) -> str:
    return element(t) if kind(t) == "list" else "dyn"


def _optional_param(t: str) -> str:
    return params(t)[0] if kind(t) == "optional_type" and params(t) else "dyn"


def _numeric_elem(t: str) -> str:
    """``sum``/``min``/``max``: one overload per element type, so a known element type
    decides the result; ``list(any)`` matches several and the result is dyn."""
    elem = _elem(t)
    return "" if is_wildcard(elem) else elem


def _same_elements(types: tuple[str, ...]) -> str | None:
    """``sets.contains(list(A), list(A))``: both lists of one element type."""
    if all(assignable(_elem(types[0]), _elem(t)) for t in types[1:]):
        return "bool"
    return None


def _index_of(types: tuple[str, ...]) -> str | None:
    if kind(types[0]) != "list" or assignable(_elem(types[0]), types[1]):
        return "int"
    return None


def _join(types: tuple[str, ...]) -> str | None:
    if kind(types[0]) != "list" or assignable(_elem(types[0]), "string"):
        return "string"
    return None


def _flatten(types: tuple[str, ...]) -> str | None:
    inner = _elem(types[0])
    if len(types) == 1 and kind(inner) == "list":
        return inner
    return list_of("dyn")


def _or_value(types: tuple[str, ...]) -> str | None:
    inner = _optional_param(types[0])
    if assignable(inner, types[1]):
        return most_general(inner, types[1])
    return None


_RULES: Final[dict[str, Callable[[tuple[str, ...]], str | None]]] = {
    "indexOf": _index_of,
    "lastIndexOf": _index_of,
    "join": _join,
    "sets.contains": _same_elements,
    "sets.equivalent": _same_elements,
    "sets.intersects": _same_elements,
    "flatten": _flatten,
    "orValue": _or_value,
    "optional.of": lambda t: optional_of(t[0]),
    "optional.ofNonZeroValue": lambda t: optional_of(t[0]),
    "optional.none": lambda _t: optional_of(FREE),
    "value": lambda t: _optional_param(t[0]) if kind(t[0]) == "optional_type" else "",
    "first": lambda t: optional_of(_elem(t[0])),
    "last": lambda t: optional_of(_elem(t[0])),
    "sum": lambda t: _numeric_elem(t[0]),
    "min": lambda t: _numeric_elem(t[0]),
    "max": lambda t: _numeric_elem(t[0]),
    # One overload per comparable element type: list(any) matches several, the result is dyn.
    "sort": lambda t: "dyn" if kind(t[0]) == "list" and is_wildcard(_elem(t[0])) else t[0],
    "reverse": lambda t: t[0] if kind(t[0]) == "list" else "",
    "distinct": lambda t: t[0],
    "slice": lambda t: t[0],
    "split": lambda _t: list_of("string"),
    "findAll": lambda _t: list_of("string"),
    "lists.range": lambda _t: list_of("int"),
    "type": lambda t: f"type({t[0]})",
}


def generic_result(name: str, types: tuple[str, ...]) -> str | None:
    """The full result type of ``name`` applied to arguments of full ``types``
    (receiver first); ``""`` when only the declared result is known, None when the
    arguments cannot bind the function's type parameters (a compile error)."""
    rule = _RULES.get(name)
    if rule is None or not types:
        return "" if rule is None else rule(types)
    return rule(types)


__all__ = ["generic_result"]
