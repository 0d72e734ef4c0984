"""Evaluate the chart's admission ``matchConditions`` over decoded objects, offline.

A small evaluator over ``dra_cel``'s parser for the CEL subset the conditions use (field
selection, ``has()``, ``exists``, ``in``, ``contains``, ``&&``, ``||``, ``!``, ``==``,
``!=``). It is stricter than CEL: selecting a missing field is an error even where CEL's
commutative ``&&``/``||`` would absorb it, so a condition that passes here is guarded in the
API server too. Anything outside the subset raises ``NotImplementedError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dra_cel.syntax import Call, Const, Ident, ListLit, Node, Select, parse

__all__ = ["NoSuchKey", "evaluate"]


class NoSuchKey(Exception):
    """The expression selected a field the object does not have (CEL: no such key)."""


def evaluate(expression: str, variables: Mapping[str, Any]) -> Any:
    """The value of ``expression`` with ``variables`` (``object``, ``oldObject``, ``request``)."""
    return _eval(parse(expression), dict(variables))


def _eval(node: Node, env: dict[str, Any]) -> Any:
    if isinstance(node, Const):
        return node.value
    if isinstance(node, Ident):
        return env[node.name]
    if isinstance(node, ListLit):
        return [_eval(e, env) for e in node.elements]
    if isinstance(node, Select):
        operand = _eval(node.operand, env)
        if not isinstance(operand, Mapping) or node.field not in operand:
            raise NoSuchKey(node.field)
        return operand[node.field]
    if isinstance(node, Call):
        return _call(node, env)
    raise NotImplementedError(type(node).__name__)


def _call(node: Call, env: dict[str, Any]) -> Any:
    fn, args = node.function, node.args
    if fn == "has":
        (select,) = args
        assert isinstance(select, Select)
        operand = _eval(select.operand, env)
        return isinstance(operand, Mapping) and select.field in operand
    if fn == "exists" and node.target is not None:
        var, body = args
        assert isinstance(var, Ident)
        return any(_eval(body, {**env, var.name: item}) for item in _eval(node.target, env))
    if fn == "contains" and node.target is not None:
        return str(_eval(args[0], env)) in str(_eval(node.target, env))
    if fn == "_&&_":
        return bool(_eval(args[0], env)) and bool(_eval(args[1], env))
    if fn == "_||_":
        return bool(_eval(args[0], env)) or bool(_eval(args[1], env))
    if fn == "!_":
        return not _eval(args[0], env)
    if fn == "_==_":
        return _eval(args[0], env) == _eval(args[1], env)
    if fn == "_!=_":
        return _eval(args[0], env) != _eval(args[1], env)
    if fn == "@in":
        return _eval(args[0], env) in _eval(args[1], env)
    raise NotImplementedError(fn)
