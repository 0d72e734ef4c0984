"""Compile names, field selections and indexing, with fast paths for device attributes."""

from __future__ import annotations

from typing import Any, Final

from .compile_base import BOOL, Compiled, CompilerBase, kind_of
from .device import CelDevice, DomainMap
from .errors import CelCompileError, CelRuntimeError
from .library import DYN, OPTIONAL, QUANTITY, TYPE_IDENTS
from .overloads import DEVICE
from .runtime import Frame
from .static_types import kind, map_of, optional_of, params, shown, value_of
from .syntax import Const, Ident, Index, Node, Select, UInt
from .values import (
    DEVICE_FIELDS,
    NONE,
    Optional,
    has_field,
    index_value,
    map_contains,
    no_overload,
    select_field,
)

#: The declared types of ``device.attributes`` and ``device.capacity``.
_ATTRIBUTES: Final = map_of("string", map_of("string", "any"))
_CAPACITY: Final = map_of("string", map_of("string", QUANTITY))


class AccessCompiler(CompilerBase):
    """Compile names, field selections and indexing, with fast paths for device attributes."""

    def _ident(self, node: Ident) -> Compiled:
        name = node.name
        if name in self.scope:
            slot, var_type = self.scope[name]

            def var(frame: Frame) -> Any:
                return frame[slot]

            return Compiled(var, kind_of(var_type), node, full=var_type)
        if name == "device":

            def device(frame: Frame) -> Any:
                return frame[0]

            return Compiled(device, DEVICE, node)
        if name in TYPE_IDENTS:
            return self._const(node, TYPE_IDENTS[name])
        raise self.error(f"undeclared reference to '{name}' (in container '')", node)

    # ------------------------------------------------------------------ device access
    def _device_domain_key(self, node: Node) -> tuple[str, str] | None:
        """``device.attributes[<const>]`` / ``device.capacity[<const>]`` -> (field, domain)."""
        if not isinstance(node, Index) or node.optional:
            return None
        base = node.operand
        if not (
            isinstance(base, Select)
            and not base.optional
            and base.field in ("attributes", "capacity")
            and isinstance(base.operand, Ident)
            and base.operand.name == "device"
            and "device" not in self.scope
        ):
            return None
        if not (isinstance(node.index, Const) and type(node.index.value) is str):
            return None
        return base.field, node.index.value

    def _device_entry(self, node: Node, domain_node: Node, name: str) -> Compiled | None:
        found = self._device_domain_key(domain_node)
        if found is None:
            return None
        which, domain = found
        key = f"{domain}/{name}"
        missing = f"no such key: {name}"
        if which == "attributes":

            def attribute(frame: Frame) -> Any:
                try:
                    return frame[0].attributes[key]
                except KeyError:
                    raise CelRuntimeError(missing) from None

            return Compiled(attribute, DYN, node, full="any")

        def capacity(frame: Frame) -> Any:
            try:
                return frame[0].capacity[key]
            except KeyError:
                raise CelRuntimeError(missing) from None

        return Compiled(capacity, QUANTITY, node)

    def _device_presence(self, node: Select) -> Compiled | None:
        found = self._device_domain_key(node.operand)
        if found is None:
            return None
        which, domain = found
        key = f"{domain}/{node.field}"
        if which == "attributes":

            def has_attribute(frame: Frame) -> bool:
                return key in frame[0].attributes

            return Compiled(has_attribute, BOOL, node)

        def has_capacity(frame: Frame) -> bool:
            return key in frame[0].capacity

        return Compiled(has_capacity, BOOL, node)

    # ------------------------------------------------------------------ select / index
    def _select(self, node: Select) -> Compiled:
        if not node.optional:
            fast = self._device_entry(node, node.operand, node.field)
            if fast is not None:
                return fast
        operand = self.compile(node.operand)
        name = node.field
        op = operand.fn
        if node.optional:

            def opt_select(frame: Frame) -> Any:
                value = op(frame)
                if type(value) is Optional:
                    if not value.has_value:
                        return NONE
                    value = value.value
                if type(value) is CelDevice or has_field(value, name):
                    return Optional(select_field(value, name))
                return NONE

            inner = operand.full
            if kind(inner) == OPTIONAL:
                inner = params(inner)[0] if params(inner) else DYN
            selected = value_of(inner) if kind(inner) == "map" else DYN
            return Compiled(
                opt_select, OPTIONAL, node, children=(operand,), full=optional_of(selected)
            )
        if operand.type == DEVICE:
            if name not in DEVICE_FIELDS:
                raise self.error(f"undefined field '{name}'", node)
            return self._device_field(node, operand, name)
        if operand.type not in (DYN, "map", OPTIONAL):
            raise self._no_field_selection(operand, node)

        def select(frame: Frame) -> Any:
            value = op(frame)
            if type(value) is Optional:
                if not value.has_value:
                    return NONE
                return Optional(select_field(value.value, name))
            return select_field(value, name)

        selected = value_of(operand.full)
        return self._fold(node, kind_of(selected), select, (operand,), selected)

    def _no_field_selection(self, operand: Compiled, node: Node) -> CelCompileError:
        """Selecting a field of a value without fields: Kubernetes' object types
        (``kubernetes.Quantity``) have a provider that knows no fields of theirs."""
        if operand.type.startswith("kubernetes."):
            return self.error(f"unexpected failed resolution of '{operand.type}'", node)
        return self.error(f"type '{shown(operand.full)}' does not support field selection", node)

    def _device_field(self, node: Select, operand: Compiled, name: str) -> Compiled:
        op = operand.fn
        direct = isinstance(node.operand, Ident)
        if name == "driver":
            if direct:

                def driver(frame: Frame) -> Any:
                    return frame[0].driver

                return Compiled(driver, "string", node)

            def driver_of(frame: Frame) -> Any:
                return op(frame).driver

            return Compiled(driver_of, "string", node)
        if name == "allowMultipleAllocations":

            def multi(frame: Frame) -> Any:
                return op(frame).allow_multiple_allocations

            return Compiled(multi, BOOL, node)
        if name == "attributes":

            def attributes(frame: Frame) -> Any:
                return op(frame).attribute_domains

            return Compiled(attributes, "map", node, full=_ATTRIBUTES)

        def capacity(frame: Frame) -> Any:
            return op(frame).capacity_domains

        return Compiled(capacity, "map", node, full=_CAPACITY)

    def _index(self, node: Index) -> Compiled:
        if not node.optional and isinstance(node.index, Const) and type(node.index.value) is str:
            fast = self._device_entry(node, node.operand, node.index.value)
            if fast is not None:
                return fast
        operand = self.compile(node.operand)
        index = self.compile(node.index)
        op, ix = operand.fn, index.fn
        if operand.type not in (DYN, "map", "list", OPTIONAL):
            raise self.error(
                "found no matching overload for '_[_]' applied to "
                f"'({shown(operand.full)}, {shown(index.full)})'",
                node,
            )
        if node.optional:

            def opt_index(frame: Frame) -> Any:
                value = op(frame)
                if type(value) is Optional:
                    if not value.has_value:
                        return NONE
                    value = value.value
                key = ix(frame)
                if type(value) is list:
                    if type(key) in (int, UInt) and 0 <= key < len(value):
                        return Optional(value[key])
                    if type(key) not in (int, UInt):
                        raise no_overload("_[?_]", value, key)
                    return NONE
                if type(value) is DomainMap and type(key) is str:
                    # Upstream's attribute/capacity maps "find" every domain (an unknown
                    # one as an empty map), so an optional lookup always has a value.
                    return Optional(value[key])
                if isinstance(value, dict):
                    if map_contains(value, key):
                        return Optional(index_value(value, key))
                    return NONE
                raise no_overload("_[?_]", value, key)

            inner = operand.full
            if kind(inner) == OPTIONAL:
                inner = params(inner)[0] if params(inner) else DYN
            return Compiled(
                opt_index,
                OPTIONAL,
                node,
                children=(operand, index),
                full=optional_of(value_of(inner)),
            )

        def index_fn(frame: Frame) -> Any:
            value = op(frame)
            if type(value) is Optional:
                if not value.has_value:
                    return NONE
                return Optional(index_value(value.value, ix(frame)))
            return index_value(value, ix(frame))

        indexed = value_of(operand.full)
        return self._fold(node, kind_of(indexed), index_fn, (operand, index), indexed)
