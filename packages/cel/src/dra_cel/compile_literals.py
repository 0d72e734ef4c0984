"""Compile list and map literals (homogeneous, with optional entries)."""

from __future__ import annotations

from typing import Any

from .compile_base import Compiled, CompilerBase, optional_inner
from .errors import CelRuntimeError
from .library import DYN
from .runtime import Frame
from .static_types import FREE, equivalent, list_of, map_of, shown
from .syntax import ListLit, MapLit, UInt
from .values import Optional, map_contains, no_overload, type_name


class LiteralCompiler(CompilerBase):
    """Compile list and map literals (homogeneous, with optional entries)."""

    # ------------------------------------------------------------------ literals
    def _homogeneous(self, parts: tuple[Compiled, ...], optional: tuple[bool, ...]) -> None:
        """Upstream's base environment enables HomogeneousAggregateLiterals: the
        statically known element (or key, or value) types of a literal must agree."""
        first: str | None = None
        for part, is_optional in zip(parts, optional, strict=True):
            found = optional_inner(part.full) if is_optional else part.full
            if first is None:
                first = found
            elif not equivalent(first, found):
                raise self.error(
                    f"expected type '{shown(first)}' but found '{shown(found)}'", part.node
                )

    def _literal_type(self, parts: tuple[Compiled, ...], optional: tuple[bool, ...]) -> str:
        """The element (key, value) type of a literal: its first part's, else free."""
        for part, is_optional in zip(parts, optional, strict=True):
            found = optional_inner(part.full) if is_optional else part.full
            if found != FREE:
                return found
        return FREE

    def _list(self, node: ListLit) -> Compiled:
        elements = tuple(self.compile(e) for e in node.elements)
        flags = node.optional or (False,) * len(elements)
        if id(node) not in self.exempt_lists:
            self._homogeneous(elements, flags)
        full = list_of(self._literal_type(elements, flags))
        fns = tuple(e.fn for e in elements)
        if any(node.optional):
            flags = node.optional

            def opt_list(frame: Frame) -> Any:
                out = []
                for f, is_opt in zip(fns, flags, strict=True):
                    value = f(frame)
                    if is_opt:
                        if type(value) is not Optional:
                            raise no_overload("optional list element", value)
                        if value.has_value:
                            out.append(value.value)
                    else:
                        out.append(value)
                return out

            return Compiled(opt_list, "list", node, children=elements, full=full)

        def make_list(frame: Frame) -> Any:
            return [f(frame) for f in fns]

        if not fns:
            return Compiled(make_list, "list", node, full=full)
        return self._fold(node, "list", make_list, elements, full)

    def _map(self, node: MapLit) -> Compiled:
        keys = tuple(self.compile(k) for k in node.keys)
        values = tuple(self.compile(v) for v in node.values)
        for k in keys:
            if k.type not in (DYN, "string", "int", "uint", "bool"):
                raise self.error(f"unsupported map key type: {k.type}", k.node)
        self._homogeneous(keys, (False,) * len(keys))
        self._homogeneous(values, node.optional)
        full = map_of(
            self._literal_type(keys, (False,) * len(keys)),
            self._literal_type(values, node.optional),
        )
        entries = tuple(
            zip((k.fn for k in keys), (v.fn for v in values), node.optional, strict=True)
        )

        def make_map(frame: Frame) -> Any:
            out: dict[Any, Any] = {}
            for kf, vf, is_opt in entries:
                key = kf(frame)
                if type(key) not in (str, int, UInt, bool):
                    raise CelRuntimeError(f"unsupported key type: {type_name(key)}")
                if map_contains(out, key):
                    raise CelRuntimeError(f"Failed with repeated key: {key}")
                value = vf(frame)
                if is_opt:
                    if type(value) is not Optional:
                        raise no_overload("optional map entry", value)
                    if not value.has_value:
                        continue
                    value = value.value
                out[key] = value
            return out

        if not entries:
            return Compiled(make_map, "map", node, full=full)
        return self._fold(node, "map", make_map, keys + values, full)
