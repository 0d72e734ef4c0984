"""The selector engine backed by this package's DRA CEL environment."""

from __future__ import annotations

from typing import cast

from dra_api_types.resource_v1 import Device

from ..cel import CelCompileError, CelDevice, CompiledSelector, compile_selector, device_from_api
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
    """Compiles selectors with ``dra_controller.cel`` (compile results cached by expression)."""

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
        """The CEL ``device`` value of a parsed device."""
        return device_from_api(dev.driver, Device.from_dict(dict(dev.raw), validate=False))
