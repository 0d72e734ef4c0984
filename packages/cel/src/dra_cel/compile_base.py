"""The compiler's building blocks: the compiled node, constant folding, the shared helpers.

:class:`CompilerBase` holds what every part of the compiler uses (the scope, errors located
in the text, constants and folding); each kind of expression is compiled by a subclass of
its own module (``compile_access``, ``compile_literals``, ``compile_operators``,
``compile_macros``, ``compile_functions``), which :class:`dra_cel.compiler.Compiler` combines.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Final

from .errors import CelCompileError, CelRuntimeError
from .library import DYN, OPTIONAL
from .positions import position
from .runtime import Fn, Frame, charge
from .static_types import is_wildcard, kind, params
from .syntax import Node, UInt
from .values import type_name

BOOL: Final = "bool"

_STATIC_TYPES: Final[dict[type, str]] = {
    bool: "bool",
    int: "int",
    UInt: "uint",
    float: "double",
    str: "string",
    bytes: "bytes",
    type(None): "null_type",
    list: "list",
    dict: "map",
}


@dataclass(slots=True)
class Compiled:
    """A compiled node: its closure, static type and (when constant) its value.

    ``type`` is the kind the closures are picked by (``list``, ``map``, ``dyn``); ``full``
    adds the parameters the type check compares (``list(int)``), the kind when it has none.
    """

    fn: Fn
    type: str
    node: Node
    is_const: bool = False
    value: Any = None
    children: tuple[Compiled, ...] = field(default=())
    full: str = ""

    def __post_init__(self) -> None:
        if not self.full:
            self.full = self.type


def kind_of(full: str) -> str:
    """The kind closures are picked by for a full static type (wildcards are dyn)."""
    return DYN if is_wildcard(full) else kind(full)


def optional_inner(full: str) -> str:
    """The type inside ``optional_type(T)`` (an optional literal element's ``T``)."""
    if kind(full) == OPTIONAL and params(full):
        return params(full)[0]
    return DYN


def _const_fn(value: Any) -> Fn:
    def fn(_frame: Frame) -> Any:
        return value

    return fn


def _raise_fn(error: CelRuntimeError) -> Fn:
    kind = type(error)

    def fn(_frame: Frame) -> Any:
        raise kind(error.message)

    return fn


class CompilerBase(ABC):
    """The state and helpers of one expression's compilation; subclasses compile the nodes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.slot_count = 2
        # Each variable in scope: its frame slot and its static type.
        self.scope: dict[str, tuple[int, str]] = {}
        # List literals that are arguments of ``format``, which upstream exempts from
        # the homogeneous-literal check (``"%s %d".format(["a", 1])``).
        self.exempt_lists: set[int] = set()

    # ------------------------------------------------------------------ helpers
    def error(self, message: str, node: Node) -> CelCompileError:
        """A compile error located where cel-go locates ``node``."""
        return CelCompileError(message, expression=self.text, position=position(self.text, node))

    def _const(self, node: Node, value: Any) -> Compiled:
        static = _STATIC_TYPES.get(type(value), type_name(value))
        return Compiled(_const_fn(value), static, node, is_const=True, value=value)

    def _fold(
        self,
        node: Node,
        static: str,
        fn: Fn,
        children: tuple[Compiled, ...],
        full: str = "",
    ) -> Compiled:
        """Evaluate now when every input is constant; keep runtime errors for runtime.

        The cost the folded evaluation spent (``lists.range(n)``, long concatenations)
        is still charged on every evaluation, so folding never hides cost from the limit.
        """
        if not children or not all(c.is_const for c in children):
            return Compiled(fn, static, node, children=children, full=full)
        frame: Frame = [None, 0]
        try:
            value = fn(frame)
        except CelRuntimeError as err:
            return Compiled(_raise_fn(err), static, node, children=children, full=full)
        spent = frame[1]
        folded = self._const(node, value)
        folded.children = children
        folded.type = static
        folded.full = full or static
        if spent:

            def charged(frame: Frame) -> Any:
                charge(frame, spent)
                return value

            folded.fn = charged
        return folded

    @abstractmethod
    def compile(self, node: Node) -> Compiled:
        """Compile a node (recursively)."""
