"""Compile the CEL AST into a tree of Python closures.

Every node becomes a function of one argument, the evaluation frame: a list holding
the device (slot 0), the runtime cost spent so far (slot 1) and one slot per
comprehension or ``cel.bind`` variable (assigned at compile time, so variable access
is a list index). Static types are inferred on the way to reject what upstream's type
checker rejects and to pick specialised closures (attribute lookups with constant
keys, comparisons against constants, constant folding).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .calls import PY_TYPES, direct_call, invoke, relation_with_number
from .comprehensions import comprehension_body
from .device import CelDevice, DomainMap
from .errors import CelCompileError, CelCostLimitError, CelRuntimeError
from .generic_calls import generic_result
from .library import (
    DYN,
    FUNCTIONS,
    OPTIONAL,
    QUANTITY,
    TYPE_IDENTS,
    Overload,
    sorted_by_keys,
)
from .overloads import DEVICE
from .positions import position
from .regex import compile_regex
from .runtime import COST_LIMIT, Fn, Frame, charge, node_count
from .static_types import (
    FREE,
    assignable,
    element,
    equivalent,
    is_wildcard,
    kind,
    list_of,
    map_of,
    most_general,
    optional_of,
    params,
    shown,
    value_of,
)
from .syntax import Call, Const, Ident, Index, ListLit, MapLit, Node, Select, UInt
from .temporal import DURATION_TYPE, TIMESTAMP_TYPE, Duration, Timestamp
from .values import (
    DEVICE_FIELDS,
    NONE,
    NUMBER_CLASSES,
    Optional,
    add,
    cel_equals,
    cel_in,
    divide,
    greater,
    greater_equal,
    has_field,
    index_value,
    less,
    less_equal,
    logical_not,
    map_contains,
    modulo,
    multiply,
    negate,
    no_overload,
    select_field,
    subtract,
    type_name,
)

BOOL: Final = "bool"
NUMERIC: Final = frozenset(("int", "uint", "double"))
ORDERED: Final = NUMERIC | {"string", "bytes", "bool", TIMESTAMP_TYPE, DURATION_TYPE}
#: Mixed-type arithmetic CEL defines: timestamp/duration combinations.
_TIME_ARITHMETIC: Final = {
    "_+_": {(TIMESTAMP_TYPE, DURATION_TYPE), (DURATION_TYPE, TIMESTAMP_TYPE)},
    "_-_": {(TIMESTAMP_TYPE, DURATION_TYPE)},
}

_SIZED: Final = (str, bytes, list)

_STATIC_TYPES: Final[dict[type, str]] = {
    bool: "bool",
    int: "int",
    UInt: "uint",
    float: "double",
    str: "string",
    bytes: "bytes",
    type(None): "null_type",
    list: "list",
    dict: "map",
}


@dataclass(slots=True)
class Compiled:
    """A compiled node: its closure, static type and (when constant) its value.

    ``type`` is the kind the closures are picked by (``list``, ``map``, ``dyn``); ``full``
    adds the parameters the type check compares (``list(int)``), the kind when it has none.
    """

    fn: Fn
    type: str
    node: Node
    is_const: bool = False
    value: Any = None
    children: tuple[Compiled, ...] = field(default=())
    full: str = ""

    def __post_init__(self) -> None:
        if not self.full:
            self.full = self.type


def _kind_of(full: str) -> str:
    """The kind closures are picked by for a full static type (wildcards are dyn)."""
    return DYN if is_wildcard(full) else kind(full)


#: The declared types of ``device.attributes`` and ``device.capacity``.
_ATTRIBUTES: Final = map_of("string", map_of("string", "any"))
_CAPACITY: Final = map_of("string", map_of("string", QUANTITY))


def _optional_inner(full: str) -> str:
    """The type inside ``optional_type(T)`` (an optional literal element's ``T``)."""
    if kind(full) == OPTIONAL and params(full):
        return params(full)[0]
    return DYN


def _const_fn(value: Any) -> Fn:
    def fn(_frame: Frame) -> Any:
        return value

    return fn


def _raise_fn(error: CelRuntimeError) -> Fn:
    kind = type(error)

    def fn(_frame: Frame) -> Any:
        raise kind(error.message)

    return fn


_MACROS: Final = frozenset(
    (
        "all",
        "exists",
        "exists_one",
        "existsOne",
        "map",
        "filter",
        "transformList",
        "transformMap",
        "optMap",
        "sortBy",
        "optFlatMap",
    )
)

_LITERAL_CHECKED: Final[dict[str, Callable[[str], Any]]] = {
    "duration": Duration.parse,
    "timestamp": Timestamp.parse,
}

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

_BINARY_OPS: Final[dict[str, Callable[[Any, Any], Any]]] = {
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


class Compiler:
    """Compiles one expression; create one per expression."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.slot_count = 2
        # Each variable in scope: its frame slot and its static type.
        self.scope: dict[str, tuple[int, str]] = {}
        # List literals that are arguments of ``format``, which upstream exempts from
        # the homogeneous-literal check (``"%s %d".format(["a", 1])``).
        self.exempt_lists: set[int] = set()

    # ------------------------------------------------------------------ helpers
    def error(self, message: str, node: Node) -> CelCompileError:
        """A compile error located where cel-go locates ``node``."""
        return CelCompileError(message, expression=self.text, position=position(self.text, node))

    def _const(self, node: Node, value: Any) -> Compiled:
        static = _STATIC_TYPES.get(type(value), type_name(value))
        return Compiled(_const_fn(value), static, node, is_const=True, value=value)

    def _fold(
        self,
        node: Node,
        static: str,
        fn: Fn,
        children: tuple[Compiled, ...],
        full: str = "",
    ) -> Compiled:
        """Evaluate now when every input is constant; keep runtime errors for runtime.

        The cost the folded evaluation spent (``lists.range(n)``, long concatenations)
        is still charged on every evaluation, so folding never hides cost from the limit.
        """
        if not children or not all(c.is_const for c in children):
            return Compiled(fn, static, node, children=children, full=full)
        frame: Frame = [None, 0]
        try:
            value = fn(frame)
        except CelRuntimeError as err:
            return Compiled(_raise_fn(err), static, node, children=children, full=full)
        spent = frame[1]
        folded = self._const(node, value)
        folded.children = children
        folded.type = static
        folded.full = full or static
        if spent:

            def charged(frame: Frame) -> Any:
                charge(frame, spent)
                return value

            folded.fn = charged
        return folded

    # ------------------------------------------------------------------ dispatch
    def compile(self, node: Node) -> Compiled:
        """Compile a node (recursively)."""
        if isinstance(node, Const):
            return self._const(node, node.value)
        if isinstance(node, Ident):
            return self._ident(node)
        if isinstance(node, Select):
            return self._select(node)
        if isinstance(node, Index):
            return self._index(node)
        if isinstance(node, ListLit):
            return self._list(node)
        if isinstance(node, MapLit):
            return self._map(node)
        if isinstance(node, Call):
            return self._call(node)
        raise self.error(f"unsupported expression {type(node).__name__}", node)  # pragma: no cover

    def _ident(self, node: Ident) -> Compiled:
        name = node.name
        if name in self.scope:
            slot, var_type = self.scope[name]

            def var(frame: Frame) -> Any:
                return frame[slot]

            return Compiled(var, _kind_of(var_type), node, full=var_type)
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
        return self._fold(node, _kind_of(selected), select, (operand,), selected)

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
        return self._fold(node, _kind_of(indexed), index_fn, (operand, index), indexed)

    # ------------------------------------------------------------------ literals
    def _homogeneous(self, parts: tuple[Compiled, ...], optional: tuple[bool, ...]) -> None:
        """Upstream's base environment enables HomogeneousAggregateLiterals: the
        statically known element (or key, or value) types of a literal must agree."""
        first: str | None = None
        for part, is_optional in zip(parts, optional, strict=True):
            found = _optional_inner(part.full) if is_optional else part.full
            if first is None:
                first = found
            elif not equivalent(first, found):
                raise self.error(
                    f"expected type '{shown(first)}' but found '{shown(found)}'", part.node
                )

    def _literal_type(self, parts: tuple[Compiled, ...], optional: tuple[bool, ...]) -> str:
        """The element (key, value) type of a literal: its first part's, else free."""
        for part, is_optional in zip(parts, optional, strict=True):
            found = _optional_inner(part.full) if is_optional else part.full
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

    # ------------------------------------------------------------------ calls
    def _call(self, node: Call) -> Compiled:
        name = node.function
        if node.target is None:
            if name == "_&&_" or name == "_||_":
                return self._logical(node)
            if name == "_?_:_":
                return self._conditional(node)
            if name == "!_":
                return self._not(node)
            if name == "-_":
                return self._unary(node, negate)
            if name in ("_==_", "_!=_"):
                return self._equality(node)
            if name == "@in":
                return self._in(node)
            if name in _BINARY_OPS:
                return self._binary(node)
            if name == "has":
                return self._has(node)
            return self._function(node, name, None)
        target = node.target
        if isinstance(target, Ident) and target.name not in self.scope:
            qualified = f"{target.name}.{name}"
            if qualified == "cel.bind":
                return self._bind(node)
            if qualified in FUNCTIONS:
                return self._function(node, qualified, None)
        if name in _MACROS:
            return self._comprehension(node)
        return self._function(node, name, target)

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
        impl = _BINARY_OPS[name]
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
        (slot,), saved = self._with_vars([name], [_optional_inner(target.full)])
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

    # ------------------------------------------------------------------ functions
    def _function(self, node: Call, name: str, target: Node | None) -> Compiled:
        overloads = FUNCTIONS.get(name)
        if overloads is None:
            # A macro name with other arguments is no macro: a call of an undeclared
            # function, as cel-go's parser leaves it.
            raise self.error(f"undeclared reference to '{name}' (in container '')", node)
        if name == "format":
            self.exempt_lists.update(id(a) for a in node.args if isinstance(a, ListLit))
        compiled_args = tuple(self.compile(a) for a in node.args)
        receiver = self.compile(target) if target is not None else None
        all_args = ((receiver,) if receiver is not None else ()) + compiled_args
        static = tuple(a.type for a in all_args)
        fulls = tuple(a.full for a in all_args)
        candidates = [
            o
            for o in overloads
            if o.receiver == (receiver is not None)
            and len(o.params) == len(all_args)
            and o.accepts_static(static)
        ]
        generic = generic_result(name, fulls)
        if not candidates or generic is None:
            named = [shown(t) for t in fulls]
            if receiver is not None:
                applied = f"{named[0]}.({', '.join(named[1:])})"
            else:
                applied = "(" + ", ".join(named) + ")"
            raise self.error(
                f"found no matching overload for '{name}' applied to '{applied}'", node
            )
        if name in _LITERAL_CHECKED and len(all_args) == 1 and all_args[0].is_const:
            self._check_literal(name, all_args[0])
        if name == "matches" and all_args[1].is_const and type(all_args[1].value) is str:
            fast = self._matches_constant(node, all_args)
            if fast is not None:
                return fast
        fns = tuple(a.fn for a in all_args)
        result_types = {o.result for o in candidates}
        static_result = result_types.pop() if len(result_types) == 1 else DYN
        if generic == DYN:
            # Several overloads match (``list(any).sort()``): cel-go types the call dyn.
            full = static_result = DYN
        elif generic and _kind_of(generic) == static_result:
            full = generic
        elif generic and static_result == DYN and not is_wildcard(generic):
            # A list's sum/min/max, an optional's value: the element type is known here.
            full = generic
            static_result = _kind_of(generic)
        else:
            full = static_result
        fn = self._call_fn(name, candidates, fns, static)
        return self._fold(node, static_result, fn, all_args, full)

    def _check_literal(self, name: str, arg: Compiled) -> None:
        """Upstream's AST validators reject bad duration and timestamp literals at compile
        time (ValidateDurationLiterals, ValidateTimestampLiterals)."""
        if type(arg.value) is not str:
            return
        try:
            _LITERAL_CHECKED[name](arg.value)
        except CelRuntimeError as err:
            raise self.error(err.message, arg.node) from None

    def _matches_constant(self, node: Call, args: tuple[Compiled, ...]) -> Compiled | None:
        """``s.matches('<constant>')``: compile the pattern once, here."""
        pattern = args[1].value
        try:
            regex = compile_regex(pattern)
        except CelRuntimeError as err:
            # Upstream programs are built with OptOptimize, which compiles constant
            # patterns when the program is created: a bad one fails compilation.
            raise self.error(err.message, args[1].node) from None
        subject = args[0].fn

        def matches(frame: Frame) -> Any:
            text = subject(frame)
            if type(text) is not str:
                raise no_overload("matches", text, pattern)
            frame[1] += 1 + len(text) // 10
            if frame[1] > COST_LIMIT:
                charge(frame, 0)
            return regex.search(text)

        return self._fold(node, BOOL, matches, args)

    def _call_fn(
        self, name: str, candidates: list[Overload], fns: tuple[Fn, ...], static: tuple[str, ...]
    ) -> Fn:
        if len(candidates) == 1:
            overload = candidates[0]
            # Arguments whose static type is dyn need a runtime check against the param.
            guards = tuple(
                PY_TYPES.get(p) if p != DYN and t == DYN else None
                for p, t in zip(overload.params, static, strict=True)
            )
            return direct_call(name, overload.impl, fns, guards, overload.cost)

        options = tuple(candidates)

        def dispatch(frame: Frame) -> Any:
            args = tuple([f(frame) for f in fns])
            for o in options:
                if o.accepts(args):
                    if o.cost is not None:
                        charge(frame, o.cost(*args))
                    return invoke(name, o.impl, args)
            raise no_overload(name, *args)

        return dispatch
