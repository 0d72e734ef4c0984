"""Compile CEL's operators: logical, conditional, negation, equality, ``in``, arithmetic and
relations, with fast paths against constants."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .calls import relation_with_number
from .compile_base import BOOL, Compiled, CompilerBase
from .errors import CelCostLimitError, CelRuntimeError
from .library import DYN
from .runtime import COST_LIMIT, Fn, Frame, charge
from .static_types import assignable, element, most_general, shown
from .syntax import Call, Node
from .temporal import DURATION_TYPE, TIMESTAMP_TYPE
from .values import (
    NUMBER_CLASSES,
    add,
    cel_equals,
    cel_in,
    divide,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_not,
    modulo,
    multiply,
    no_overload,
    subtract,
)

NUMERIC: Final = frozenset(("int", "uint", "double"))
ORDERED: Final = NUMERIC | {"string", "bytes", "bool", TIMESTAMP_TYPE, DURATION_TYPE}

#: Mixed-type arithmetic CEL defines: timestamp/duration combinations.
_TIME_ARITHMETIC: Final = {
    "_+_": {(TIMESTAMP_TYPE, DURATION_TYPE), (DURATION_TYPE, TIMESTAMP_TYPE)},
    "_-_": {(TIMESTAMP_TYPE, DURATION_TYPE)},
}

_SIZED: Final = (str, bytes, list)

#: Per arithmetic operator, the types an operand may have when the other one is dyn, and
#: whether that type alone decides the result (duration + dyn may be a timestamp).
_DYN_ARITHMETIC: Final[dict[str, dict[str, bool]]] = {
    "_+_": {
        "int": True,
        "uint": True,
        "double": True,
        "string": True,
        "bytes": True,
        "list": True,
        DURATION_TYPE: False,
        TIMESTAMP_TYPE: True,
        # null is assignable to timestamp and duration (proto messages): ``null + dyn``
        # can reach add_timestamp_duration at check time.
        "null_type": False,
    },
    "_-_": {
        "int": True,
        "uint": True,
        "double": True,
        DURATION_TYPE: False,
        TIMESTAMP_TYPE: False,
        "null_type": False,
    },
    "_*_": {"int": True, "uint": True, "double": True},
    "_/_": {"int": True, "uint": True, "double": True},
    "_%_": {"int": True, "uint": True},
}

BINARY_OPS: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "_+_": add,
    "_-_": subtract,
    "_*_": multiply,
    "_/_": divide,
    "_%_": modulo,
    "_<_": less,
    "_<=_": less_equal,
    "_>_": greater,
    "_>=_": greater_equal,
}


class OperatorCompiler(CompilerBase):
    """Compiles the operators (``&&``, ``?:``, ``!``, ``-``, ``==``, ``in``, ``+``, ``<``, ...)."""

    def _logical(self, node: Call) -> Compiled:
        is_and = node.function == "_&&_"
        operands: list[Node] = []

        def flatten(n: Node) -> None:
            if isinstance(n, Call) and n.function == node.function and n.target is None:
                flatten(n.args[0])
                flatten(n.args[1])
            else:
                operands.append(n)

        flatten(node)
        compiled = tuple(self.compile(o) for o in operands)
        for c in compiled:
            if c.type not in (BOOL, DYN):
                raise self.error(
                    f"found no matching overload for '{node.function}' applied to "
                    f"'({shown(c.full)}, bool)'",
                    c.node,
                )
        stop = not is_and  # the value that decides the result
        fns = tuple(c.fn for c in compiled)
        op_name = node.function
        if len(fns) == 2:
            first, second = fns

            def logical2(frame: Frame) -> Any:
                try:
                    a = first(frame)
                except CelCostLimitError:
                    raise
                except CelRuntimeError as err:
                    b = second(frame)
                    if b is stop:
                        return stop
                    raise err from None
                if a is stop:
                    return stop
                b = second(frame)
                if b is stop:
                    return stop
                if a is not True and a is not False:
                    raise no_overload(op_name, a, b)
                if b is not True and b is not False:
                    raise no_overload(op_name, a, b)
                return not stop

            fn: Fn = logical2
        else:

            def logical_n(frame: Frame) -> Any:
                error: CelRuntimeError | None = None
                for f in fns:
                    try:
                        value = f(frame)
                    except CelCostLimitError:
                        raise
                    except CelRuntimeError as err:
                        if error is None:
                            error = err
                        continue
                    if value is stop:
                        return stop
                    if value is not True and value is not False and error is None:
                        error = no_overload(op_name, value)
                if error is not None:
                    raise error
                return not stop

            fn = logical_n
        return self._fold(node, BOOL, fn, compiled)

    def _conditional(self, node: Call) -> Compiled:
        cond, then, other = (self.compile(a) for a in node.args)
        applied = f"'({shown(cond.full)}, {shown(then.full)}, {shown(other.full)})'"
        if cond.type not in (BOOL, DYN) or not assignable(then.full, other.full):
            raise self.error(f"found no matching overload for '_?_:_' applied to {applied}", node)
        cf, tf, of = cond.fn, then.fn, other.fn

        def conditional(frame: Frame) -> Any:
            c = cf(frame)
            if c is True:
                return tf(frame)
            if c is False:
                return of(frame)
            raise no_overload("_?_:_", c)

        static = then.type if then.type == other.type else DYN
        full = most_general(then.full, other.full)
        return self._fold(node, static, conditional, (cond, then, other), full)

    def _not(self, node: Call) -> Compiled:
        operand = self.compile(node.args[0])
        if operand.type not in (BOOL, DYN):
            raise self.error(
                f"found no matching overload for '!_' applied to '({shown(operand.full)})'", node
            )
        op = operand.fn

        def not_fn(frame: Frame) -> Any:
            value = op(frame)
            if value is True:
                return False
            if value is False:
                return True
            return logical_not(value)

        return self._fold(node, BOOL, not_fn, (operand,))

    def _unary(self, node: Call, impl: Callable[[Any], Any]) -> Compiled:
        operand = self.compile(node.args[0])
        if operand.type not in ("int", "double", DYN):
            raise self.error(
                f"found no matching overload for '-_' applied to '({shown(operand.full)})'", node
            )
        op = operand.fn

        def unary(frame: Frame) -> Any:
            return impl(op(frame))

        return self._fold(node, operand.type, unary, (operand,))

    def _equality(self, node: Call) -> Compiled:
        left, right = (self.compile(a) for a in node.args)
        # cel-go checks ``==`` as one overload (A, A): both sides must unify, with no
        # numeric conversion (``1 == 1.0`` fails to check; it is true only through dyn).
        if not assignable(left.full, right.full):
            raise self.error(
                f"found no matching overload for '{node.function}' applied to "
                f"'({shown(left.full)}, {shown(right.full)})'",
                node,
            )
        negated = node.function == "_!=_"
        lf, rf = left.fn, right.fn
        fn: Fn
        # Against a string constant Python's == is CEL's (str never equals non-str).
        const_side = right if right.is_const else left if left.is_const else None
        other = left if const_side is right else right
        if const_side is not None and type(const_side.value) is str:
            c = const_side.value
            of = other.fn
            if negated:

                def ne_str(frame: Frame) -> Any:
                    return of(frame) != c

                fn = ne_str
            else:

                def eq_str(frame: Frame) -> Any:
                    return of(frame) == c

                fn = eq_str
        elif const_side is not None and type(const_side.value) in NUMBER_CLASSES:
            c = const_side.value
            of = other.fn

            def eq_number(frame: Frame) -> Any:
                value = of(frame)
                return (type(value) in NUMBER_CLASSES and value == c) is not negated

            fn = eq_number
        elif negated:

            def ne(frame: Frame) -> Any:
                return not cel_equals(lf(frame), rf(frame))

            fn = ne
        else:

            def eq(frame: Frame) -> Any:
                return cel_equals(lf(frame), rf(frame))

            fn = eq
        return self._fold(node, BOOL, fn, (left, right))

    def _in(self, node: Call) -> Compiled:
        item, container = (self.compile(a) for a in node.args)
        if container.type not in (DYN, "list", "map") or not assignable(
            item.full, element(container.full)
        ):
            raise self.error(
                "found no matching overload for '@in' applied to "
                f"'({shown(item.full)}, {shown(container.full)})'",
                node,
            )
        itf, cf = item.fn, container.fn
        if (
            container.is_const
            and type(container.value) is list
            and all(type(x) is str for x in container.value)
        ):
            members = frozenset(container.value)

            def in_strings(frame: Frame) -> Any:
                value = itf(frame)
                return type(value) is str and value in members

            return self._fold(node, BOOL, in_strings, (item, container))
        if (
            container.is_const
            and type(container.value) is list
            and all(type(x) in NUMBER_CLASSES for x in container.value)
        ):
            # Numbers compare by value across int/uint/double, as Python's set lookup
            # does (1 == 1.0 == 1u); bools are excluded by the type check.
            numbers = frozenset(container.value)

            def in_numbers(frame: Frame) -> Any:
                value = itf(frame)
                return type(value) in NUMBER_CLASSES and value in numbers

            return self._fold(node, BOOL, in_numbers, (item, container))

        def in_fn(frame: Frame) -> Any:
            return cel_in(itf(frame), cf(frame))

        return self._fold(node, BOOL, in_fn, (item, container))

    def _binary(self, node: Call) -> Compiled:
        left, right = (self.compile(a) for a in node.args)
        name = node.function
        lt, rt = left.type, right.type
        mismatch = (
            f"found no matching overload for '{name}' applied to "
            f"'({shown(left.full)}, {shown(right.full)})'"
        )
        impl = BINARY_OPS[name]
        is_relation = name in ("_<_", "_<=_", "_>_", "_>=_")
        decided = ""  # the result's full type when one typed side decides it
        if DYN not in (lt, rt):
            if is_relation:
                ok = (lt in NUMERIC and rt in NUMERIC) or (lt == rt and lt in ORDERED)
            else:
                allowed = {
                    "_+_": {"int", "uint", "double", "string", "bytes", "list", DURATION_TYPE},
                    "_-_": {"int", "uint", "double", DURATION_TYPE, TIMESTAMP_TYPE},
                    "_*_": {"int", "uint", "double"},
                    "_/_": {"int", "uint", "double"},
                    "_%_": {"int", "uint"},
                }[name]
                ok = (lt == rt and lt in allowed) or (lt, rt) in _TIME_ARITHMETIC.get(name, ())
                # list(A) + list(A): the element types must unify too.
                ok = ok and (lt != "list" or assignable(left.full, right.full))
            if not ok:
                raise self.error(mismatch, node)
        elif not is_relation and (lt == DYN) != (rt == DYN):
            # One side typed: only the overloads taking that type there can match
            # (``dyn + 'x'`` is add_string, a string; ``dyn + true`` matches none).
            known = rt if lt == DYN else lt
            usable = _DYN_ARITHMETIC[name]
            if known not in usable:
                raise self.error(mismatch, node)
            if usable[known]:
                lt = rt = known
                # The typed side binds the overload: ``any + [1]`` is add_list, list(int).
                decided = right.full if left.type == DYN else left.full
        static = BOOL if is_relation else (lt if lt == rt else DYN)
        if name == "_-_" and lt == rt == TIMESTAMP_TYPE:
            static = DURATION_TYPE
        elif {lt, rt} == {TIMESTAMP_TYPE, DURATION_TYPE}:
            static = TIMESTAMP_TYPE
        full = most_general(left.full, right.full) if static == "list" else static
        if DYN in (left.type, right.type) and not is_relation and decided:
            full = decided
        lf, rf = left.fn, right.fn
        if is_relation and right.is_const and type(right.value) in NUMBER_CLASSES:
            fast = relation_with_number(name, lf, right.value)
            if fast is not None:
                return self._fold(node, static, fast, (left, right))

        if name == "_+_" and static in ("string", "bytes", "list", DYN):
            # Concatenation is priced by result size so that growing strings and lists
            # (doubling through cel.bind, say) run into the cost limit, as upstream.
            def concat(frame: Frame) -> Any:
                result = add(lf(frame), rf(frame))
                if type(result) in _SIZED:
                    frame[1] += 1 + len(result) // 10
                    if frame[1] > COST_LIMIT:
                        charge(frame, 0)
                return result

            return self._fold(node, static, concat, (left, right), full)

        def binary(frame: Frame) -> Any:
            return impl(lf(frame), rf(frame))

        return self._fold(node, static, binary, (left, right), full)
