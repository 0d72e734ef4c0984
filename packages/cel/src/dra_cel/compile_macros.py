"""Compile the macros: ``has``, ``cel.bind``, the comprehensions, ``sortBy``, ``optMap``."""

from __future__ import annotations

from typing import Any

from .compile_access import AccessCompiler
from .compile_base import BOOL, Compiled, optional_inner
from .compile_functions import FunctionCompiler
from .comprehensions import comprehension_body
from .errors import CelCompileError, CelRuntimeError
from .library import DYN, OPTIONAL, sorted_by_keys
from .overloads import DEVICE
from .runtime import Frame, charge, node_count
from .static_types import element, list_of, map_of, optional_of, shown, value_of
from .syntax import Call, Ident, Node, Select
from .values import DEVICE_FIELDS, NONE, Optional, has_field, no_overload, type_name


class MacroCompiler(AccessCompiler, FunctionCompiler):
    """Compile the macros: ``has``, ``cel.bind``, the comprehensions, ``sortBy``, ``optMap``."""

    # ------------------------------------------------------------------ macros
    def _has(self, node: Call) -> Compiled:
        if len(node.args) != 1 or not isinstance(node.args[0], Select) or node.args[0].optional:
            raise self.error("invalid argument to has() macro", node)
        arg = node.args[0]
        fast = self._device_presence(arg)
        if fast is not None:
            fast.node = node  # located at has(, as cel-go locates the macro
            return fast
        operand = self.compile(arg.operand)
        name = arg.field
        if operand.type == DEVICE:
            return self._const(node, name in DEVICE_FIELDS)
        if operand.type not in (DYN, "map"):
            raise self._no_field_selection(operand, node)
        op = operand.fn

        def has(frame: Frame) -> Any:
            return has_field(op(frame), name)

        return Compiled(has, BOOL, node, children=(operand,))

    def _variable(self, node: Node) -> str:
        if not isinstance(node, Ident):
            raise self.error("argument must be a simple name", node)
        return node.name

    def _with_vars(
        self, names: list[str], types: list[str]
    ) -> tuple[list[int], dict[str, tuple[int, str]]]:
        saved = dict(self.scope)
        slots = []
        for name, var_type in zip(names, types, strict=True):
            slot = self.slot_count
            self.slot_count += 1
            self.scope[name] = (slot, var_type)
            slots.append(slot)
        return slots, saved

    def _bind(self, node: Call) -> Compiled:
        if len(node.args) != 3:
            raise self.error("cel.bind() requires 3 arguments", node)
        name = self._variable(node.args[0])
        init = self.compile(node.args[1])
        (slot,), saved = self._with_vars([name], [init.full])
        try:
            body = self.compile(node.args[2])
        finally:
            self.scope = saved
        inf, bf = init.fn, body.fn

        def bind(frame: Frame) -> Any:
            frame[slot] = inf(frame)
            return bf(frame)

        return Compiled(bind, body.type, node, children=(init, body), full=body.full)

    def _comprehension(self, node: Call) -> Compiled:
        name = node.function
        assert node.target is not None
        args = node.args
        if name in ("optMap", "optFlatMap"):
            return self._opt_map(node)
        if name == "sortBy":
            return self._sort_by(node)
        two_var_only = name in ("transformList", "transformMap", "existsOne")
        two_var_form = name in ("all", "exists", "exists_one") and len(args) == 3
        nvars = 2 if two_var_only or two_var_form else 1
        expected: tuple[int, ...]
        if name == "map" or (two_var_only and name != "existsOne"):
            expected = (nvars + 1, nvars + 2)
        else:
            expected = (nvars + 1,)
        if len(args) not in expected:
            return self._function(node, name, node.target)
        var_names = [self._variable(a) for a in args[:nvars]]
        iter_range = self.compile(node.target)
        if iter_range.type not in (DYN, "list", "map"):
            raise self.error(
                f"expression of type '{shown(iter_range.full)}' cannot be range of a comprehension "
                "(must be list, map, or dynamic)",
                node.target,
            )
        item = element(iter_range.full)
        if nvars == 1:
            var_types = [item]
        elif iter_range.type == "list":
            var_types = ["int", item]
        else:
            var_types = [item, value_of(iter_range.full)]
        slots, saved = self._with_vars(var_names, var_types)
        try:
            parts = [self.compile(a) for a in args[nvars:]]
        finally:
            self.scope = saved
        step_cost = 1 + sum(node_count(a) for a in args[nvars:])
        # The last part of map/transform* is the transform; every other part is a predicate.
        transforms = 1 if name in ("map", "transformList", "transformMap") else 0
        produced = parts[-1].full if transforms else var_types[0]
        for p in parts[: len(parts) - transforms]:
            if p.type not in (BOOL, DYN):
                raise self._predicate_error(name, p, produced, node)
        rf = iter_range.fn
        body = comprehension_body(name, nvars, slots, [p.fn for p in parts], step_cost)

        def run(frame: Frame) -> Any:
            rng = rf(frame)
            if type(rng) is list:
                return body(frame, enumerate(rng), True)
            if isinstance(rng, dict):
                return body(frame, list(rng.items()), False)
            raise CelRuntimeError(f"got '{type_name(rng)}', expected iterable type")

        static = {
            "all": BOOL,
            "exists": BOOL,
            "exists_one": BOOL,
            "existsOne": BOOL,
            "map": "list",
            "filter": "list",
            "transformList": "list",
            "transformMap": "map",
        }[name]
        full = {
            "map": list_of(produced),
            "filter": list_of(produced),
            "transformList": list_of(produced),
            "transformMap": map_of(var_types[0], produced),
        }.get(name, static)
        return Compiled(run, static, node, children=(iter_range, *parts), full=full)

    def _predicate_error(
        self, name: str, predicate: Compiled, produced: str, node: Call
    ) -> CelCompileError:
        """cel-go's error for a predicate that is not bool, as the macro's expansion
        meets it: ``all``/``exists`` combine it with ``&&``/``||`` (a bool is expected),
        the others choose with ``?:`` between two accumulators."""
        found = shown(predicate.full)
        if name in ("all", "exists"):
            return self.error(f"expected type 'bool' but found '{found}'", predicate.node)
        accumulator = "int" if name in ("exists_one", "existsOne") else shown(list_of(produced))
        if name in ("transformMap",):
            accumulator = shown(map_of(DYN, produced))
        return self.error(
            f"found no matching overload for '_?_:_' applied to "
            f"'({found}, {accumulator}, {accumulator})'",
            node,
        )

    def _sort_by(self, node: Call) -> Compiled:
        """``list.sortBy(x, key)`` (ext.Lists): a stable sort on a computed key."""
        assert node.target is not None
        if len(node.args) != 2:
            raise self.error("sortBy() requires 2 arguments", node)
        target = self.compile(node.target)
        if target.type not in (DYN, "list"):
            raise self.error(f"sortBy() applies to lists, not {target.type}", node.target)
        name = self._variable(node.args[0])
        (slot,), saved = self._with_vars([name], [element(target.full)])
        try:
            key = self.compile(node.args[1])
        finally:
            self.scope = saved
        tf, kf = target.fn, key.fn
        step_cost = 1 + node_count(node.args[1])

        def sort_by(frame: Frame) -> Any:
            items = tf(frame)
            if type(items) is not list:
                raise no_overload("sortBy", items)
            keys = []
            for item in items:
                charge(frame, step_cost)
                frame[slot] = item
                keys.append(kf(frame))
            return [item for _, item in sorted_by_keys(keys, items)]

        return Compiled(sort_by, "list", node, children=(target, key), full=target.full)

    def _opt_map(self, node: Call) -> Compiled:
        assert node.target is not None
        if len(node.args) != 2:
            raise self.error(f"{node.function}() requires 2 arguments", node)
        target = self.compile(node.target)
        name = self._variable(node.args[0])
        (slot,), saved = self._with_vars([name], [optional_inner(target.full)])
        try:
            body = self.compile(node.args[1])
        finally:
            self.scope = saved
        tf, bf = target.fn, body.fn
        flat = node.function == "optFlatMap"

        def opt_map(frame: Frame) -> Any:
            opt = tf(frame)
            if type(opt) is not Optional:
                raise no_overload(node.function, opt)
            if not opt.has_value:
                return NONE
            frame[slot] = opt.value
            result = bf(frame)
            if flat:
                if type(result) is not Optional:
                    raise no_overload(node.function, result)
                return result
            return Optional(result)

        full = body.full if flat else optional_of(body.full)
        return Compiled(opt_map, OPTIONAL, node, children=(target, body), full=full)
