"""The selector engine backed by this package's DRA CEL environment."""

from __future__ import annotations

from typing import cast

from dra_api_types import Version
from dra_cel import (
    AttributeValue,
    CelCompileError,
    CelDevice,
    CelRuntimeError,
    CompiledSelector,
    compile_selector,
)
from dra_cel.device import qualify

from .model import DeviceInfo
from .selectors import SelectorCompileFailure


class _CelExpression:
    """A compiled selector behind the engine-neutral interface of the allocator."""

    __slots__ = ("_selector",)

    def __init__(self, selector: CompiledSelector) -> None:
        self._selector = selector

    def matches(self, device: object) -> bool:
        """Evaluate on a device built by ``CelEngine.device``."""
        return self._selector.matches(cast(CelDevice, device))

    def explain(self, device: object) -> str:
        """Why the selector is false on the device."""
        return self._selector.explain(cast(CelDevice, device))


class CelEngine:
    """Compiles selectors with ``dra_cel`` (compile results cached by expression)."""

    def __init__(self) -> None:
        self._compiled: dict[str, _CelExpression | str] = {}

    def compile(self, expression: str) -> _CelExpression:
        """Compile once; a compile error is remembered and raised again on every use."""
        compiled = self._compiled.get(expression)
        if compiled is None:
            try:
                compiled = _CelExpression(compile_selector(expression))
            except CelCompileError as exc:
                compiled = str(exc)
            self._compiled[expression] = compiled
        if isinstance(compiled, str):
            raise SelectorCompileFailure(compiled)
        return compiled

    def device(self, dev: DeviceInfo) -> object:
        """The CEL ``device`` value of a parsed device (built without a model round trip)."""
        attributes: dict[str, AttributeValue] = {}
        for name, (kind, value) in dev.attributes.items():
            if kind == "version":
                try:
                    attributes[name] = Version.parse(str(value))
                except ValueError as exc:
                    raise CelRuntimeError(
                        f"device attribute {name}: invalid semantic version {value!r}: {exc}"
                    ) from exc
            elif kind in ("int", "bool", "string"):
                attributes[name] = value  # type: ignore[assignment]
            elif kind == "versions" and isinstance(value, tuple):
                try:
                    attributes[name] = [Version.parse(str(v)) for v in value]
                except ValueError as exc:
                    raise CelRuntimeError(
                        f"device attribute {name}: invalid semantic version in {value!r}: {exc}"
                    ) from exc
            elif kind in ("ints", "bools", "strings") and isinstance(value, tuple):
                attributes[name] = list(value)
            else:
                raise CelRuntimeError(f"device attribute {name}: no value set")
        capacity = {qualify(dev.driver, name): c.quantity for name, c in dev.capacity.items()}
        return CelDevice(
            driver=dev.driver,
            attributes=attributes,
            capacity=capacity,
            allow_multiple_allocations=dev.allow_multiple,
        )
