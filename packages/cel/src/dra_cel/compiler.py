"""Compile the CEL AST into a tree of Python closures.

Every node becomes a function of one argument, the evaluation frame: a list holding
the device (slot 0), the runtime cost spent so far (slot 1) and one slot per
comprehension or ``cel.bind`` variable (assigned at compile time, so variable access
is a list index). Static types are inferred on the way to reject what upstream's type
checker rejects and to pick specialised closures (attribute lookups with constant
keys, comparisons against constants, constant folding).
"""

from __future__ import annotations

from typing import Final

from .compile_base import BOOL, Compiled
from .compile_literals import LiteralCompiler
from .compile_macros import MacroCompiler
from .compile_operators import BINARY_OPS, NUMERIC, ORDERED, OperatorCompiler
from .library import FUNCTIONS
from .syntax import Call, Const, Ident, Index, ListLit, MapLit, Node, Select
from .values import negate

__all__ = ["BOOL", "NUMERIC", "ORDERED", "Compiled", "Compiler"]

_MACROS: Final = frozenset(
    (
        "all",
        "exists",
        "exists_one",
        "existsOne",
        "map",
        "filter",
        "transformList",
        "transformMap",
        "optMap",
        "sortBy",
        "optFlatMap",
    )
)


class Compiler(MacroCompiler, LiteralCompiler, OperatorCompiler):
    """Compiles one expression; create one per expression."""

    # ------------------------------------------------------------------ dispatch
    def compile(self, node: Node) -> Compiled:
        """Compile a node (recursively)."""
        if isinstance(node, Const):
            return self._const(node, node.value)
        if isinstance(node, Ident):
            return self._ident(node)
        if isinstance(node, Select):
            return self._select(node)
        if isinstance(node, Index):
            return self._index(node)
        if isinstance(node, ListLit):
            return self._list(node)
        if isinstance(node, MapLit):
            return self._map(node)
        if isinstance(node, Call):
            return self._call(node)
        raise self.error(f"unsupported expression {type(node).__name__}", node)  # pragma: no cover

    # ------------------------------------------------------------------ calls
    def _call(self, node: Call) -> Compiled:
        name = node.function
        if node.target is None:
            if name == "_&&_" or name == "_||_":
                return self._logical(node)
            if name == "_?_:_":
                return self._conditional(node)
            if name == "!_":
                return self._not(node)
            if name == "-_":
                return self._unary(node, negate)
            if name in ("_==_", "_!=_"):
                return self._equality(node)
            if name == "@in":
                return self._in(node)
            if name in BINARY_OPS:
                return self._binary(node)
            if name == "has":
                return self._has(node)
            return self._function(node, name, None)
        target = node.target
        if isinstance(target, Ident) and target.name not in self.scope:
            qualified = f"{target.name}.{name}"
            if qualified == "cel.bind":
                return self._bind(node)
            if qualified in FUNCTIONS:
                return self._function(node, qualified, None)
        if name in _MACROS:
            return self._comprehension(node)
        return self._function(node, name, target)
