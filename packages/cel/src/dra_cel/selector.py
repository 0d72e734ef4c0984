"""Compiled DRA device selectors: the public entry point of the CEL environment."""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any, Final

from dra_api_types import Quantity, Version

from .compiler import BOOL, Compiled, Compiler
from .device import CelDevice
from .errors import CelCompileError, CelCostLimitError, CelError, CelRuntimeError
from .footprint import Footprint, footprint
from .library import DYN
from .runtime import Frame
from .syntax import Call, Node, UInt, parse
from .values import Optional

#: Upstream's CELSelectorExpressionMaxLength.
MAX_EXPRESSION_LENGTH: Final = 10 * 1024

_RELATIONS: Final = frozenset(("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in"))


class CompiledSelector:
    """A compiled CEL device selector.

    Thread-safe and reusable: :meth:`matches` keeps no state between calls.
    """

    __slots__ = ("_compiled", "_frame_size", "_root", "expression", "footprint")

    def __init__(
        self,
        expression: str,
        compiled: Compiled,
        frame_size: int,
        reads: Footprint | None = None,
    ) -> None:
        self.expression = expression
        #: The device parts the value depends on (None: it may depend on any).
        self.footprint = reads
        self._compiled = compiled
        self._root = compiled.fn
        self._frame_size = frame_size

    def __repr__(self) -> str:
        return f"CompiledSelector({self.expression!r})"

    def _frame(self, device: CelDevice) -> Frame:
        frame: Frame = [None] * self._frame_size
        frame[0] = device
        frame[1] = 0
        return frame

    def matches(self, device: CelDevice) -> bool:
        """Evaluate against one device.

        Raises :class:`CelRuntimeError` when evaluation fails (unknown attribute,
        wrong types, a non-bool result) and :class:`CelCostLimitError` past the cost
        limit; upstream aborts the allocation attempt in both cases.
        """
        if self._frame_size == 2:
            frame: Frame = [device, 0]
        else:
            frame = self._frame(device)
        try:
            result = self._root(frame)
        except CelError as err:
            raise type(err)(err.message, expression=self.expression) from None
        except RecursionError:
            raise CelRuntimeError(
                "expression nesting too deep to evaluate", expression=self.expression
            ) from None
        except Exception as err:
            # A library function met a value it did not expect: still a per-device CEL
            # failure for the allocator, never a crash of the caller.
            raise CelRuntimeError(
                f"evaluation failed: {type(err).__name__}: {err}", expression=self.expression
            ) from err
        if result is True or result is False:
            return result
        raise CelRuntimeError(
            f"must evaluate to bool, got {_render(result)}", expression=self.expression
        )

    def explain(self, device: CelDevice) -> str:
        """Say why the selector is false (or fails) for ``device``: the deciding sub-expression.

        For ``a && b && c`` that is the first false operand; for ``a || b`` every
        operand; comparisons show the values on both sides.
        """
        frame = self._frame(device)
        return _explain(self, self._compiled, frame)


def _evaluate(compiled: Compiled, frame: Frame) -> tuple[Any, CelRuntimeError | None]:
    try:
        return compiled.fn(list(frame)), None
    except CelRuntimeError as err:
        return None, err


def _explain(selector: CompiledSelector, compiled: Compiled, frame: Frame) -> str:
    text = selector.expression
    value, error = _evaluate(compiled, frame)
    if error is None:
        if value is True:
            return f"{_src(text, compiled.node)} is true"
        if value is not False:
            return f"{_src(text, compiled.node)} evaluated to {_render(value)}, not a bool"
    return _why(text, compiled, frame)


def _src(text: str, node: Node) -> str:
    return " ".join(text[node.start : node.end].split())


def _why(text: str, compiled: Compiled, frame: Frame) -> str:
    """Explain a node that is false or fails; descend to the deciding child."""
    node = compiled.node
    value, error = _evaluate(compiled, frame)
    if error is not None:
        for child in compiled.children:
            _, child_error = _evaluate(child, frame)
            if child_error is not None and child.node is not node:
                return _why(text, child, frame)
        return f"{_src(text, node)} failed: {error.message}"
    if isinstance(node, Call) and node.target is None and compiled.children:
        if node.function == "_&&_":
            for child in compiled.children:
                child_value, child_error = _evaluate(child, frame)
                if child_error is not None or child_value is not True:
                    return _why(text, child, frame)
        if node.function == "_||_":
            reasons = [_why(text, child, frame) for child in compiled.children]
            return "none is true: " + "; ".join(reasons)
        if node.function == "!_":
            return f"{_src(text, node.args[0])} is true"
        if node.function in _RELATIONS and len(compiled.children) == 2:
            shown: list[str] = []
            for side in compiled.children:
                if side.is_const:
                    continue
                shown.append(f"{_src(text, side.node)} = {_render(_evaluate(side, frame)[0])}")
                # For x.compareTo(y) >= 0, the value of x is what the reader needs.
                if isinstance(side.node, Call) and side.node.target is not None:
                    receiver = side.children[0] if side.children else None
                    if receiver is not None and not receiver.is_const:
                        value = _render(_evaluate(receiver, frame)[0])
                        shown.append(f"{_src(text, receiver.node)} = {value}")
            suffix = f" ({', '.join(shown)})" if shown else ""
            return f"{_src(text, node)} is false{suffix}"
    if isinstance(node, Call) and node.target is not None and compiled.children:
        receiver = compiled.children[0]
        if not receiver.is_const:
            current = _render(_evaluate(receiver, frame)[0])
            receiver_text = _src(text, receiver.node)
            return f"{_src(text, node)} is {_render(value)} ({receiver_text} = {current})"
    return f"{_src(text, node)} is {_render(value)}"


def _render(value: Any) -> str:
    """Render a value the way it would be written in CEL."""
    t = type(value)
    if t is bool:
        return "true" if value else "false"
    if t is str:
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if t is UInt:
        return f"{int(value)}u"
    if t is int or t is float:
        return repr(value)
    if value is None:
        return "null"
    if t is bytes:
        return "b" + repr(value)[1:]
    if t is Quantity:
        return f'quantity("{value}")'
    if t is Version:
        return f'semver("{value}")'
    if t is list:
        return "[" + ", ".join(_render(x) for x in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_render(k)}: {_render(v)}" for k, v in value.items()) + "}"
    if t is Optional:
        return f"optional.of({_render(value.value)})" if value.has_value else "optional.none()"
    return str(value)


_lock = threading.Lock()


@lru_cache(maxsize=4096)
def _compile_cached(expression: str) -> CompiledSelector | CelCompileError:
    # Failures are cached too: a broken class selector is asked about for every device.
    try:
        return _compile(expression)
    except CelCompileError as err:
        return err


def _compile(expression: str) -> CompiledSelector:
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise CelCompileError(
            f"expression too long ({len(expression)} characters, "
            f"maximum is {MAX_EXPRESSION_LENGTH})",
            expression=expression,
        )
    if not expression.strip():
        raise CelCompileError("expression is empty", expression=expression)
    try:
        ast = parse(expression)
        compiler = Compiler(expression)
        compiled = compiler.compile(ast)
    except RecursionError:
        raise CelCompileError("expression nesting too deep", expression=expression) from None
    if compiled.type not in (BOOL, DYN):
        raise CelCompileError(
            f"must evaluate to bool or the unknown type, not {compiled.type}",
            expression=expression,
            position=0,
        )
    return CompiledSelector(expression, compiled, compiler.slot_count, footprint(ast))


def compile_selector(expression: str) -> CompiledSelector:
    """Compile a DRA CEL selector expression (cached: the same text gives the same object).

    Raises :class:`CelCompileError` for syntax errors (with position), unknown
    variables, functions or fields, overloads that cannot match, a result that is
    statically not a bool, and expressions longer than upstream's limit.
    """
    with _lock:
        result = _compile_cached(expression)
    if isinstance(result, CelCompileError):
        raise CelCompileError(
            result.message, expression=result.expression, position=result.position
        )
    return result


__all__ = ["MAX_EXPRESSION_LENGTH", "CelCostLimitError", "CompiledSelector", "compile_selector"]
