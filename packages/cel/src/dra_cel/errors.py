"""Errors raised by the DRA CEL environment.

Exception tree::

    CelError                      base of everything raised here
    +-- CelCompileError           the expression cannot be compiled (syntax, unknown
    |                             function or variable, statically non-bool result, too long)
    +-- CelRuntimeError           evaluation failed for one device (unknown attribute,
        |                         no matching overload, overflow, ...); like upstream it
        |                         aborts the allocation attempt instead of meaning ``false``
        +-- CelCostLimitError     the runtime cost budget (1,000,000) was exceeded
"""

from __future__ import annotations


class CelError(Exception):
    """Base class of all DRA CEL errors; carries the expression text."""

    def __init__(self, message: str, *, expression: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.expression = expression

    def __str__(self) -> str:
        return self.message


class CelCompileError(CelError):
    """The expression cannot be compiled.

    ``position`` is the 0-based character offset of the problem where known; ``line``
    and ``column`` are 1-based.
    """

    def __init__(
        self,
        message: str,
        *,
        expression: str = "",
        position: int | None = None,
    ) -> None:
        super().__init__(message, expression=expression)
        self.position = position
        self.line: int | None = None
        self.column: int | None = None
        if position is not None:
            before = expression[:position]
            self.line = before.count("\n") + 1
            self.column = position - (before.rfind("\n") + 1) + 1

    def __str__(self) -> str:
        if self.line is None:
            return f"compilation failed: {self.message}"
        return f"compilation failed: {self.line}:{self.column}: {self.message}"


class CelRuntimeError(CelError):
    """Evaluating the expression against a device failed.

    Raised out of :meth:`CompiledSelector.matches`; ``device`` names the device where
    the caller supplied one (the allocator adds it when it reports the error).
    """


class CelCostLimitError(CelRuntimeError):
    """The evaluation exceeded the runtime cost limit."""
