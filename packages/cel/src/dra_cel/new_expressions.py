"""What the API server's "new expressions" environment refuses that stored ones accept.

:func:`compile_selector` compiles in the stored-expressions environment (everything
declared: the allocator must evaluate whatever the API server once stored). A create, or a
changed selector, is compiled by the API server with only what its feature gates declare
(:class:`~dra_cel.environment.Environment`):

- without ``DRAConsumableCapacity``: ``device.allowMultipleAllocations`` is an undefined field;
- without ``DRAListTypeAttributes``: ``includes`` is undeclared, and an attribute value is
  ``any``, which cannot be the range of a comprehension (``all``, ``exists``, ``map``, ...).

Example::

    from dra_cel.environment import Environment
    from dra_cel.new_expressions import new_expression_error

    err = new_expression_error("device.allowMultipleAllocations",
                               Environment(consumable_capacity=False))
    assert err is not None and "allowMultipleAllocations" in err.message
"""

from __future__ import annotations

from typing import Final

from .environment import Environment
from .errors import CelCompileError
from .positions import position
from .syntax import Call, Ident, Index, ListLit, MapLit, Node, Select, parse

#: Macros whose target is iterated.
_COMPREHENSIONS: Final = frozenset(
    (
        "all",
        "exists",
        "exists_one",
        "existsOne",
        "map",
        "filter",
        "transformList",
        "transformMap",
        "sortBy",
    )
)
# What a name or expression is, as far as the gated declarations go: the device, its
# attribute domains map, one domain's map, one attribute value; None for anything else.
_Kind = str | None


class _Checker:
    def __init__(self, text: str, env: Environment) -> None:
        self.text = text
        self.env = env

    def error(self, message: str, node: Node) -> CelCompileError:
        return CelCompileError(message, expression=self.text, position=position(self.text, node))

    def kind(self, node: Node, scope: dict[str, _Kind]) -> _Kind:
        if isinstance(node, Ident):
            if node.name in scope:
                return scope[node.name]
            return "device" if node.name == "device" else None
        if isinstance(node, Select) and not node.optional:
            return self._member(self.kind(node.operand, scope), node.field)
        if isinstance(node, Index) and not node.optional:
            return self._member(self.kind(node.operand, scope), None)
        if isinstance(node, Call) and node.function == "bind" and len(node.args) == 3:
            target = node.target
            name = node.args[0]
            if isinstance(target, Ident) and target.name == "cel" and isinstance(name, Ident):
                inner = {**scope, name.name: self.kind(node.args[1], scope)}
                return self.kind(node.args[2], inner)
        return None

    @staticmethod
    def _member(outer: _Kind, field: str | None) -> _Kind:
        if outer == "device":
            return "domains" if field == "attributes" else None
        if outer == "domains":
            return "domain"
        if outer == "domain":
            return "value"
        return None

    def check(self, node: Node, scope: dict[str, _Kind]) -> None:
        if isinstance(node, Select):
            if (
                node.field == "allowMultipleAllocations"
                and not self.env.consumable_capacity
                and self.kind(node.operand, scope) == "device"
            ):
                raise CelCompileError(
                    "undefined field 'allowMultipleAllocations'",
                    expression=self.text,
                    position=node.end - len(node.field) - 1,  # the dot, as cel-go
                )
            self.check(node.operand, scope)
            return
        if isinstance(node, Index):
            self.check(node.operand, scope)
            self.check(node.index, scope)
            return
        if isinstance(node, ListLit):
            for element in node.elements:
                self.check(element, scope)
            return
        if isinstance(node, MapLit):
            for part in (*node.keys, *node.values):
                self.check(part, scope)
            return
        if isinstance(node, Call):
            self._call(node, scope)

    def _call(self, node: Call, scope: dict[str, _Kind]) -> None:
        target = node.target
        if node.function == "includes" and not self.env.list_type_attributes:
            raise self.error("undeclared reference to 'includes' (in container '')", node)
        if target is not None and node.function in _COMPREHENSIONS and node.args:
            self.check(target, scope)
            range_kind = self.kind(target, scope)
            if range_kind == "value" and not self.env.list_type_attributes:
                raise self.error(
                    "expression of type 'any' cannot be range of a comprehension "
                    "(must be list, map, or dynamic)",
                    target,
                )
            two = node.function in ("transformList", "transformMap", "existsOne") or (
                node.function in ("all", "exists", "exists_one") and len(node.args) == 3
            )
            nvars = 2 if two else 1
            names = [a.name for a in node.args[:nvars] if isinstance(a, Ident)]
            # Two variables over a map: the key, then the value one level down.
            value_kind = self._member(range_kind, None) if nvars == 2 else None
            inner = dict(scope)
            for i, name in enumerate(names):
                inner[name] = value_kind if i == 1 else None
            for arg in node.args[nvars:]:
                self.check(arg, inner)
            return
        is_bind = node.function == "bind" and isinstance(target, Ident) and target.name == "cel"
        if is_bind and len(node.args) == 3 and isinstance(node.args[0], Ident):
            self.check(node.args[1], scope)
            inner = {**scope, node.args[0].name: self.kind(node.args[1], scope)}
            self.check(node.args[2], inner)
            return
        if target is not None:
            self.check(target, scope)
        for arg in node.args:
            self.check(arg, scope)


def new_expression_error(expression: str, env: Environment) -> CelCompileError | None:
    """The API server's compile error for ``expression`` as a new selector under ``env``,
    beyond what :func:`compile_selector` reports; None when there is none.

    Call it on expressions that :func:`compile_selector` accepts.
    """
    if env.consumable_capacity and env.list_type_attributes:
        return None  # everything is declared, as for stored expressions
    try:
        _Checker(expression, env).check(parse(expression), {})
    except CelCompileError as err:
        return err
    return None


__all__ = ["new_expression_error"]
