"""Bridge between the allocator and a CEL implementation.

The allocator only needs "compile this expression" and "does it match this device";
the engine is injected so the search loop stays independent of how CEL is evaluated.
"""

from __future__ import annotations

from typing import Protocol

from .model import DeviceInfo


class CompiledExpression(Protocol):
    """A compiled selector."""

    def matches(self, device: object) -> bool:
        """Evaluate against a CEL device; raises on runtime errors."""
        ...

    def explain(self, device: object) -> str:
        """The sub-expression that made the selector false (for diagnostics)."""
        ...


class SelectorEngine(Protocol):
    """Compiles selectors and converts devices into the engine's device value."""

    def compile(self, expression: str) -> CompiledExpression:
        """Compile (cached by the engine); raises ``SelectorCompileFailure`` on errors."""
        ...

    def device(self, dev: DeviceInfo) -> object:
        """The engine's representation of the device."""
        ...

    def evaluate(self, expression: str, dev: DeviceInfo) -> bool | Exception:
        """The selector's value on the device, or the runtime error it raised.

        Raises ``SelectorCompileFailure`` when the expression does not compile.
        """
        ...


class SelectorCompileFailure(Exception):
    """The engine could not compile an expression."""


class SelectorRuntimeFailure(Exception):
    """The engine failed while evaluating an expression."""


def evaluate(engine: SelectorEngine, expression: str, dev: DeviceInfo) -> bool | Exception:
    """The selector's value on the device, or the runtime error it raised (both cached).

    Raises ``SelectorCompileFailure`` when the expression does not compile.
    """
    cache = dev.selector_cache
    cached = cache.get(expression)
    if cached is None:
        cached = engine.evaluate(expression, dev)
        cache[expression] = cached
    return cached
