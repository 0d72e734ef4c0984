"""Evaluate the chart's admission CEL (webhook ``matchConditions``, policy expressions) offline.

A small evaluator over ``dra_cel``'s parser for the CEL subset the chart uses: field selection
(also optional, ``x.?f`` with ``orValue``), indexing, list and map literals, ``has()``, the
macros ``exists``, ``all`` and ``filter`` (over lists, and over a map's keys), ``in``,
``contains``, ``size``, ``join``, ``+`` (strings, lists), the conditional, ``&&``, ``||``,
``!``, comparisons. It is
stricter than CEL: selecting a missing field is an error even where CEL's commutative
``&&``/``||`` would absorb it, so an expression that passes here is guarded in the API server
too. Anything outside the subset raises ``NotImplementedError``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from dra_cel.syntax import Call, Const, Ident, Index, ListLit, MapLit, Node, Select, parse

__all__ = ["NoSuchKey", "evaluate"]


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "_==_": operator.eq,
    "_!=_": operator.ne,
    "_<_": operator.lt,
    "_<=_": operator.le,
    "_>_": operator.gt,
    "_>=_": operator.ge,
    "_+_": operator.add,
    "@in": lambda item, container: item in container,
}


class NoSuchKey(Exception):
    """The expression selected a field the object does not have (CEL: no such key)."""


@dataclass(frozen=True)
class _Optional:
    """CEL's optional value (``x.?f``): ``present`` False is ``optional.none()``."""

    present: bool
    value: Any = None


def evaluate(expression: str, variables: Mapping[str, Any]) -> Any:
    """The value of ``expression`` with ``variables`` (``object``, ``oldObject``, ``request``,
    ``variables``: any mapping, also one that computes its values when read)."""
    return _eval(parse(expression), variables)


def _eval(node: Node, env: Mapping[str, Any]) -> Any:
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Ident):
        return env[node.name]
    if isinstance(node, ListLit):
        return [_eval(e, env) for e in node.elements]
    if isinstance(node, MapLit):
        return {_eval(k, env): _eval(v, env) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, Select):
        return _select(_eval(node.operand, env), node.field, optional=node.optional)
    if isinstance(node, Index):
        if node.optional:
            raise NotImplementedError("optional index")
        operand, key = _eval(node.operand, env), _eval(node.index, env)
        if isinstance(operand, Mapping) and key not in operand:
            raise NoSuchKey(str(key))
        return operand[key]
    if isinstance(node, Call):
        return _call(node, env)
    raise NotImplementedError(type(node).__name__)


def _select(operand: Any, field: str, *, optional: bool) -> Any:
    if isinstance(operand, _Optional):
        # Selecting on an optional stays optional (none stays none).
        if not operand.present:
            return operand
        return _select(operand.value, field, optional=True)
    if optional:
        found = isinstance(operand, Mapping) and field in operand
        return _Optional(found, operand[field] if found else None)
    if not isinstance(operand, Mapping) or field not in operand:
        raise NoSuchKey(field)
    return operand[field]


def _macro(node: Call, env: Mapping[str, Any]) -> Any:
    assert node.target is not None
    var, body = node.args
    assert isinstance(var, Ident)
    items = list(_eval(node.target, env))  # a map's keys, as CEL's macros range over them

    def test(item: Any) -> bool:
        return bool(_eval(body, {**env, var.name: item}))

    if node.function == "exists":
        return any(test(i) for i in items)
    if node.function == "all":
        return all(test(i) for i in items)
    return [i for i in items if test(i)]


def _method(node: Call, env: Mapping[str, Any]) -> Any:
    fn, args = node.function, node.args
    assert node.target is not None
    target = _eval(node.target, env)
    if fn == "contains":
        return str(_eval(args[0], env)) in str(target)
    if fn == "orValue" and isinstance(target, _Optional):
        return target.value if target.present else _eval(args[0], env)
    if fn == "size":
        return len(target)
    if fn == "join":
        separator = _eval(args[0], env) if args else ""
        return str(separator).join(str(t) for t in target)
    raise NotImplementedError(fn)


def _call(node: Call, env: Mapping[str, Any]) -> Any:
    fn, args = node.function, node.args
    if fn in ("exists", "all", "filter") and node.target is not None:
        return _macro(node, env)
    if node.target is not None:
        return _method(node, env)
    if fn == "has":
        (select,) = args
        assert isinstance(select, Select)
        operand = _eval(select.operand, env)
        return isinstance(operand, Mapping) and select.field in operand
    if fn == "size":
        return len(_eval(args[0], env))
    if fn == "_?_:_":
        return _eval(args[1] if _eval(args[0], env) else args[2], env)
    if fn == "_&&_":
        return bool(_eval(args[0], env)) and bool(_eval(args[1], env))
    if fn == "_||_":
        return bool(_eval(args[0], env)) or bool(_eval(args[1], env))
    if fn == "!_":
        return not _eval(args[0], env)
    if fn in _BINARY:
        return _BINARY[fn](_eval(args[0], env), _eval(args[1], env))
    raise NotImplementedError(fn)
