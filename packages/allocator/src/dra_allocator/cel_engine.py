"""The selector engine backed by this package's DRA CEL environment."""

from __future__ import annotations

from collections.abc import Hashable
from typing import cast

from dra_api_types import Quantity, Version
from dra_cel import (
    CelCompileError,
    CelDevice,
    CelRuntimeError,
    CompiledSelector,
    Footprint,
    compile_selector,
)
from dra_cel.device import SCALAR_KINDS, attribute_value, qualify

from .model import DeviceInfo
from .selectors import SelectorCompileFailure

#: How many shared selector values (and parsed versions) an engine keeps before it starts
#: over.
SHARED_VALUES_MAX = 65_536


class _CelExpression:
    """A compiled selector behind the engine-neutral interface of the allocator."""

    __slots__ = ("_selector", "footprint")

    def __init__(self, selector: CompiledSelector) -> None:
        self._selector = selector
        self.footprint = selector.footprint

    def matches(self, device: object) -> bool:
        """Evaluate on a device built by ``CelEngine.device``."""
        return self._selector.matches(cast(CelDevice, device))

    def explain(self, device: object) -> str:
        """Why the selector is false on the device."""
        return self._selector.explain(cast(CelDevice, device))


class CelEngine:
    """Compiles selectors with ``dra_cel`` (compile results cached by expression).

    Values are shared between devices equal in what a selector reads (its footprint): at
    1,000 nodes a class selector meets ~14,000 devices but a handful of distinct drivers and
    ``type`` attributes, and ``kubectl dra explain`` asks about every one of them.
    """

    def __init__(self) -> None:
        self._compiled: dict[str, _CelExpression | str] = {}
        self._shared: dict[tuple[str, Hashable], bool | Exception] = {}
        self._versions: dict[str, Version | str] = {}

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

    def evaluate(self, expression: str, dev: DeviceInfo) -> bool | Exception:
        """The selector's value on the device, or the runtime error it raised.

        Raises ``SelectorCompileFailure`` when the expression does not compile. Builds the
        device's CEL value (``dev.cel_device``) only when no device with the same footprint
        was evaluated before.
        """
        compiled = self.compile(expression)
        key: tuple[str, Hashable] | None = None
        if compiled.footprint is not None and self._converts(dev):
            key = (expression, _footprint_value(compiled.footprint, dev))
            shared = self._shared.get(key)
            if shared is not None:
                return shared
        try:
            if dev.cel_device is None:
                dev.cel_device = self.device(dev)
            value: bool | Exception = bool(compiled.matches(dev.cel_device))
        except Exception as exc:  # a runtime error aborts allocation, as upstream
            value = exc
        if key is not None:
            if len(self._shared) >= SHARED_VALUES_MAX:
                # A long-lived engine (the allocation controller) meets new devices for
                # ever; selectors reading per-device names (a UUID) keep one value each.
                self._shared.clear()
            self._shared[key] = value
        return value

    def device(self, dev: DeviceInfo) -> object:
        """The CEL ``device`` value of a parsed device (built without a model round trip;
        versions parsed through the engine's memo).

        Raises:
            CelRuntimeError: an attribute does not convert (an invalid semantic version, no
                value set); every selector on the device then fails, as upstream's.
        """
        attributes = {
            name: attribute_value(name, kind, value, parse_version=self._version)
            for name, (kind, value) in dev.attributes.items()
        }
        return CelDevice(
            driver=dev.driver,
            attributes=attributes,
            capacity=_qualified_capacity(dev),
            allow_multiple_allocations=dev.allow_multiple,
        )

    def _version(self, text: str) -> Version:
        """``Version.parse``, remembered (a fleet repeats a few driver versions)."""
        parsed = self._versions.get(text)
        if parsed is None:
            try:
                parsed = Version.parse(text)
            except ValueError as exc:
                parsed = str(exc)
            if len(self._versions) >= SHARED_VALUES_MAX:
                self._versions.clear()
            self._versions[text] = parsed
        if isinstance(parsed, str):
            raise ValueError(parsed)
        return parsed

    def _converts(self, dev: DeviceInfo) -> bool:
        """Whether ``device`` converts the device without an error: one that fails fails
        every selector, whatever the selector reads, so it shares no value. Scalars always
        convert; only the rest are tried (cheaper than building the device)."""
        try:
            for name, (kind, value) in dev.attributes.items():
                if kind not in SCALAR_KINDS:
                    attribute_value(name, kind, value, parse_version=self._version)
        except CelRuntimeError:
            return False
        return True


def _qualified_capacity(dev: DeviceInfo) -> dict[str, Quantity]:
    """The device's capacities by fully qualified name, as CEL sees them."""
    return {qualify(dev.driver, name): c.quantity for name, c in dev.capacity.items()}


def _footprint_value(reads: Footprint, dev: DeviceInfo) -> Hashable:
    """What of ``dev`` the selector reads: equal values, equal selector results."""
    attrs = dev.attributes
    value: tuple[Hashable, ...] = (
        dev.driver if reads.driver else None,
        dev.allow_multiple if reads.allow_multiple else None,
        tuple(attrs.get(name) for name in reads.attributes),
    )
    for domain in reads.attribute_domains:
        prefix = domain + "/"
        value += (tuple(sorted((k, v) for k, v in attrs.items() if k.startswith(prefix))),)
    if reads.capacity or reads.capacity_domains:
        caps = {name: str(q) for name, q in _qualified_capacity(dev).items()}
        value += (tuple(caps.get(name) for name in reads.capacity),)
        for domain in reads.capacity_domains:
            prefix = domain + "/"
            value += (tuple(sorted((k, v) for k, v in caps.items() if k.startswith(prefix))),)
    return value
