"""The compile-time worst-case cost of a DRA CEL selector, as the API server estimates it.

The API server refuses a device selector whose estimated worst-case cost exceeds
``CELSelectorExpressionMaxCost`` (1,000,000) with ``Forbidden: too complex, exceeds cost
limit``. The estimate is cel-go's checker cost (``checker.Cost``) with the Kubernetes cost
estimator (``k8s.io/apiserver/pkg/cel/library.CostEstimator``), the cost options of the
libraries in the base environment (``ext.Lists`` version 3, ``ext.Sets``; presence tests
free) and DRA's size estimator (``k8s.io/dynamic-resource-allocation/cel``): a driver name
is at most 63 characters, a domain 63, an attribute or capacity name 32, a device has at
most 32 attribute (capacity) domains and names, an attribute value is at most 64 long.

The walk follows the checker's rules over this package's AST, with macros costed as the
comprehensions cel-go expands them to. Types are inferred here only as far as the rules
depend on them (which overload a call resolves to, whether a select is on a map or
struct, whether a value has a fixed size).

Example::

    from dra_cel.cost_estimate import estimate_cost

    assert estimate_cost("device.driver == 'gpu.nvidia.com'").hi == 3
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final

from .cost_ranges import ONE, U64_MAX, UNKNOWN, ZERO, Range, add_u64, fixed, mul_u64
from .environment import Environment
from .syntax import Call, Const, Ident, Index, ListLit, MapLit, Node, Select, UInt, parse

#: Upstream's CELSelectorExpressionMaxCost.
MAX_SELECTOR_COST: Final = 1_000_000

_STRING_FACTOR: Final = 0.1  # common.StringTraversalCostFactor
_REGEX_FACTOR: Final = 0.25  # common.RegexStringLengthCostFactor
_LIST_CREATE: Final = 10
_MAP_CREATE: Final = 30

# DRA's declared maximum sizes (k8s.io/api/resource/v1 constants).
_DRIVER_MAX: Final = 63
_DOMAIN_MAX: Final = 63
_ID_MAX: Final = 32
_ENTRIES_MAX: Final = 32
_ATTRIBUTE_VALUE_MAX: Final = 64


@dataclass(frozen=True, slots=True)
class Ty:
    """A CEL type as far as cost rules look at it: a kind and its parameters."""

    kind: str
    params: tuple[Ty, ...] = ()


DYN: Final = Ty("dyn")
ANY: Final = Ty("any")
BOOL: Final = Ty("bool")
INT: Final = Ty("int")
UINT: Final = Ty("uint")
DOUBLE: Final = Ty("double")
STRING: Final = Ty("string")
BYTES: Final = Ty("bytes")
NULL: Final = Ty("null_type")
QUANTITY: Final = Ty("kubernetes.Quantity")
SEMVER: Final = Ty("kubernetes.Semver")
URL: Final = Ty("kubernetes.URL")
FORMAT: Final = Ty("kubernetes.NamedFormat")
IP: Final = Ty("net.IP")
CIDR: Final = Ty("net.CIDR")
DEVICE: Final = Ty("kubernetes.DRADevice")
OPTIONAL: Final = Ty("optional_type", (DYN,))
_SCALARS: Final = frozenset(("bool", "double", "google.protobuf.Duration", "int", "uint"))
_SCALARS_ALL: Final = _SCALARS | {"google.protobuf.Timestamp"}
_STRUCTS: Final = frozenset(
    (DEVICE.kind, QUANTITY.kind, SEMVER.kind, URL.kind, FORMAT.kind)
)  # cel.ObjectType: selecting a field of one costs 1 like a map
_CHEAP_EQUALITY: Final = frozenset((QUANTITY.kind, SEMVER.kind, IP.kind, CIDR.kind))
_MAX_FORMAT_SIZE: Final = 253  # cel.MaxFormatSize
_MAX_NAME_FORMAT_REGEX: Final = 1000  # cel.MaxNameFormatRegexSize


def list_of(elem: Ty) -> Ty:
    """``list(elem)``."""
    return Ty("list", (elem,))


def map_of(key: Ty, value: Ty) -> Ty:
    """``map(key, value)``."""
    return Ty("map", (key, value))


def _is_dyn(t: Ty) -> bool:
    return t.kind in ("dyn", "any")


def _is_scalar(t: Ty) -> bool:
    if t.kind in _SCALARS_ALL:
        return True
    return t.kind == "optional_type" and bool(t.params) and _is_scalar(t.params[0])


@dataclass(frozen=True, slots=True)
class _Decl:
    """A declared type of the device variable with its maximum size (``DeclType``)."""

    max_elements: int
    fields: dict[str, _Decl] = field(default_factory=dict)
    key: _Decl | None = None
    elem: _Decl | None = None
    is_attribute_value: bool = False


def _device_decl() -> _Decl:
    attribute = _Decl(_ATTRIBUTE_VALUE_MAX, is_attribute_value=True)
    domain = _Decl(_DOMAIN_MAX)
    ident = _Decl(_ID_MAX)
    inner_attributes = _Decl(_ENTRIES_MAX, key=ident, elem=attribute)
    quantity = _Decl(8)
    inner_capacity = _Decl(_ENTRIES_MAX, key=ident, elem=quantity)
    return _Decl(
        0,
        fields={
            "driver": _Decl(_DRIVER_MAX),
            "attributes": _Decl(_ENTRIES_MAX, key=domain, elem=inner_attributes),
            "capacity": _Decl(_ENTRIES_MAX, key=domain, elem=inner_capacity),
            "allowMultipleAllocations": _Decl(1),
        },
    )


_DEVICE_DECL: Final = _device_decl()


def _declared_size(path: Sequence[str] | None) -> Range | None:
    """DRA's size estimator: the maximum size along a path from ``device``."""
    if not path or path[0] != "device":
        return None
    node = _DEVICE_DECL
    for name in path[1:]:
        if name in ("@items", "@values"):
            if node.elem is None:
                return None
            node = node.elem
        elif name == "@keys":
            if node.key is None:
                return None
            node = node.key
        elif name in node.fields:
            node = node.fields[name]
        elif node.elem is not None and node.elem.is_attribute_value:
            node = node.elem
        else:
            return None
    return Range(0, node.max_elements)


@dataclass(slots=True)
class _Entry:
    """What is known of a container's entries: its kind and the key and value sizes."""

    kind: str
    key: Range
    value: Range

    def union(self, other: _Entry | None) -> _Entry | None:
        if other is None:
            return None
        return _Entry(self.kind, self.key.union(other.key), self.value.union(other.value))


@dataclass(slots=True)
class _Var:
    path: tuple[str, ...] | None
    size: Range | None
    entry: _Entry | None
    type: Ty


@dataclass(slots=True)
class _Info:
    """What the walk learned about one node."""

    cost: Range
    type: Ty
    path: tuple[str, ...] | None = None
    size: Range | None = None
    entry: _Entry | None = None
    const: object = None
    is_literal: bool = False
    accumulator: bool = False


_ACCU: Final = "@result"


class _Coster:
    def __init__(self, env: Environment) -> None:
        self.env = env
        self.scopes: dict[str, list[_Var]] = {}

    # -------------------------------------------------------------- sizes
    def size(self, info: _Info) -> Range | None:
        """``computeSize``: computed, literal, declared, scalar, then variable size."""
        if info.size is not None:
            return info.size
        declared = None if info.accumulator else _declared_size(info.path)
        if declared is not None:
            info.size = declared
            return declared
        if _is_scalar(info.type):
            return ONE
        return None

    def size_or_unknown(self, info: _Info) -> Range:
        found = self.size(info)
        return UNKNOWN if found is None else found

    # -------------------------------------------------------------- scopes
    def push(self, name: str, var: _Var) -> None:
        self.scopes.setdefault(name, []).append(var)

    def pop(self, name: str) -> None:
        self.scopes[name].pop()

    def peek(self, name: str) -> _Var | None:
        stack = self.scopes.get(name)
        return stack[-1] if stack else None

    # -------------------------------------------------------------- walk
    def cost(self, node: Node) -> _Info:
        if isinstance(node, Const):
            return self._const(node.value)
        if isinstance(node, Ident):
            return self._ident(node.name)
        if isinstance(node, Select):
            return self._select(node)
        if isinstance(node, Index):
            return self._index(node)
        if isinstance(node, ListLit):
            return self._list([self.cost(e) for e in node.elements])
        if isinstance(node, MapLit):
            return self._map(node)
        if isinstance(node, Call):
            return self._call(node)
        raise TypeError(f"unknown node {type(node).__name__}")  # pragma: no cover

    def _const(self, value: object) -> _Info:
        t = _const_type(value)
        size: Range | None = None
        if isinstance(value, (str, bytes)):
            size = fixed(len(value))
        elif t.kind in _SCALARS or value is None:
            size = ONE
        return _Info(ZERO, t, size=size, const=value, is_literal=True)

    def _ident(self, name: str) -> _Info:
        var = self.peek(name)
        if var is not None:
            return _Info(ONE, var.type, path=var.path, size=var.size, entry=var.entry)
        if name == "device":
            return _Info(ONE, DEVICE, path=("device",))
        # A type name (int, string, ...): a constant of type "type".
        return _Info(ONE, Ty("type"))

    def _select(self, node: Select) -> _Info:
        operand = self.cost(node.operand)
        if node.optional:
            # x.?f is the call _?._(x, "f"): one for the call.
            return _Info(operand.cost + ONE, OPTIONAL)
        cost = operand.cost
        if operand.type.kind == "map" or operand.type.kind in _STRUCTS:
            cost = cost + ONE
        path = (*operand.path, node.field) if operand.path is not None else (node.field,)
        return _Info(cost, self._field_type(operand.type, node.field), path=path)

    def _field_type(self, t: Ty, name: str) -> Ty:
        if t == DEVICE:
            # Attribute values are "any" (scalars only), or "dyn" with list-type attributes.
            value = DYN if self.env.list_type_attributes else ANY
            inner_attributes = map_of(STRING, value)
            return {
                "driver": STRING,
                "attributes": map_of(STRING, inner_attributes),
                "capacity": map_of(STRING, map_of(STRING, QUANTITY)),
                "allowMultipleAllocations": BOOL,
            }.get(name, DYN)
        if t.kind == "map" and len(t.params) == 2:
            return t.params[1]
        if t.kind == "optional_type":
            return OPTIONAL
        return DYN

    def _index(self, node: Index) -> _Info:
        operand = self.cost(node.operand)
        index = self.cost(node.index)
        cost = operand.cost + index.cost + ONE
        if node.optional:
            return _Info(cost, OPTIONAL)
        t = operand.type
        if t.kind == "list" and t.params:
            suffix, result = "@items", t.params[0]
        elif t.kind == "map" and len(t.params) == 2:
            suffix, result = "@values", t.params[1]
        else:
            suffix, result = "@values", DYN
        base = () if operand.path is None else operand.path
        info = _Info(cost, result, path=(*base, suffix))
        if operand.entry is not None:
            info.size = operand.entry.value
        return info

    def _list(self, elements: list[_Info]) -> _Info:
        cost = fixed(_LIST_CREATE)
        item = Range(0, 0) if not elements else Range(U64_MAX, 0)
        for e in elements:
            cost = cost + e.cost
            item = item.union(self.size_or_unknown(e))
        return _Info(
            cost,
            list_of(_common_type([e.type for e in elements])),
            size=fixed(len(elements)),
            entry=_Entry("list", ONE, item),
            is_literal=True,
        )

    def _map(self, node: MapLit) -> _Info:
        cost = fixed(_MAP_CREATE)
        empty = not node.keys
        key_size = Range(0, 0) if empty else Range(U64_MAX, 0)
        value_size = Range(0, 0) if empty else Range(U64_MAX, 0)
        keys: list[Ty] = []
        values: list[Ty] = []
        for k_node, v_node in zip(node.keys, node.values, strict=True):
            k = self.cost(k_node)
            v = self.cost(v_node)
            cost = cost + k.cost + v.cost
            key_size = key_size.union(self.size_or_unknown(k))
            value_size = value_size.union(self.size_or_unknown(v))
            keys.append(k.type)
            values.append(v.type)
        return _Info(
            cost,
            map_of(_common_type(keys), _common_type(values)),
            size=fixed(len(node.keys)),
            entry=_Entry("map", key_size, value_size),
            is_literal=True,
        )

    # -------------------------------------------------------------- calls
    def _call(self, node: Call) -> _Info:
        name = node.function
        target = node.target
        if target is None:
            if name == "has":
                return self._has(node)
            if name == "dyn" and len(node.args) == 1:
                arg = self.cost(node.args[0])
                return _Info(arg.cost + ONE, DYN, size=self.size(arg), entry=arg.entry)
            return self._function(name, None, node.args)
        if isinstance(target, Ident) and self.peek(target.name) is None:
            qualified = f"{target.name}.{name}"
            if qualified == "cel.bind" and len(node.args) == 3:
                return self._bind(node)
            if target.name in ("lists", "sets", "strings", "optional", "format", "ip"):
                return self._function(qualified, None, node.args)
        if name in ("all", "exists", "exists_one", "existsOne") and len(node.args) in (2, 3):
            return self._quantifier(node)
        if name in ("map", "filter", "transformList", "transformMap"):
            return self._transform(node)
        if name == "sortBy" and len(node.args) == 2:
            return self._sort_by(node)
        if name in ("optMap", "optFlatMap") and len(node.args) == 2:
            return self._opt_map(node)
        return self._function(name, target, node.args)

    def _has(self, node: Call) -> _Info:
        arg = node.args[0]
        assert isinstance(arg, Select)
        # Presence tests are free in Kubernetes (PresenceTestHasCost(false)).
        return _Info(self.cost(arg.operand).cost, BOOL)

    def _bind(self, node: Call) -> _Info:
        name_node, init_node, body_node = node.args
        assert isinstance(name_node, Ident)
        init = self.cost(init_node)
        self.push(name_node.name, _Var(init.path, self.size(init), init.entry, init.type))
        try:
            body = self.cost(body_node)
        finally:
            self.pop(name_node.name)
        # The bind's empty iteration range is still a list creation.
        cost = fixed(_LIST_CREATE) + init.cost + body.cost
        return _Info(cost, body.type, size=self.size(body), entry=body.entry)

    def _iteration(self, rng: _Info, names: Sequence[str]) -> list[str]:
        """Bind the iteration variables of a comprehension over ``rng``; returns them."""
        entry = rng.entry
        container = entry.kind if entry is not None else rng.type.kind
        is_list = container == "list"
        elem = rng.type.params[0] if rng.type.kind == "list" and rng.type.params else DYN
        key_t = rng.type.params[0] if rng.type.kind == "map" and rng.type.params else DYN
        value_t = rng.type.params[1] if rng.type.kind == "map" and rng.type.params else DYN
        base = () if rng.path is None else rng.path
        if len(names) == 1:
            if is_list:
                size = entry.value if entry is not None else None
                self.push(names[0], _Var((*base, "@items"), size, None, elem))
            else:
                size = entry.key if entry is not None else None
                self.push(names[0], _Var((*base, "@keys"), size, None, key_t))
        else:
            if is_list:
                key_size = entry.key if entry is not None else None
                value_size = entry.value if entry is not None else None
                self.push(names[0], _Var((*base, "@indices"), key_size, None, INT))
                self.push(names[1], _Var((*base, "@items"), value_size, None, elem))
            else:
                key_size = entry.key if entry is not None else None
                value_size = entry.value if entry is not None else None
                self.push(names[0], _Var((*base, "@keys"), key_size, None, key_t))
                self.push(names[1], _Var((*base, "@values"), value_size, None, value_t))
        return list(names)

    def _quantifier(self, node: Call) -> _Info:
        name = node.function
        nvars = len(node.args) - 1

        def body(parts: list[_Info]) -> tuple[Range, Range]:
            p = parts[-1].cost
            if name == "all":
                return fixed(2), Range(1, add_u64(1, p.hi))
            if name == "exists":
                return fixed(3), Range(1, add_u64(1, p.hi))
            return ZERO, Range(add_u64(p.lo, 1), add_u64(p.hi, 2))

        assert node.target is not None
        rng = self.cost(node.target)
        names = [a.name if isinstance(a, Ident) else "" for a in node.args[:nvars]]
        bound = self._iteration(rng, names)
        try:
            parts = [self.cost(a) for a in node.args[nvars:]]
        finally:
            for bname in reversed(bound):
                self.pop(bname)
        condition, step = body(parts)
        loop = _times(self.size_or_unknown(rng), step + condition)
        result = fixed(2) if name in ("exists_one", "existsOne") else ONE
        return _Info(rng.cost + result + loop, BOOL, size=ONE)

    def _transform(self, node: Call) -> _Info:
        """``map``, ``filter``, ``transformList``, ``transformMap``: an accumulating loop.

        The step is ``accu + [elem]`` (12 plus the element's cost; 13 for ``filter``'s
        ``[x]``) or ``cel.@mapInsert(accu, k, v)`` (3 plus the value's), under
        ``p ? step : accu`` when filtered.
        """
        name = node.function
        nvars = 2 if name in ("transformList", "transformMap") else 1
        is_map = name == "transformMap"
        filtered = len(node.args) == nvars + 2 or name == "filter"
        assert node.target is not None
        rng = self.cost(node.target)
        names = [a.name if isinstance(a, Ident) else "" for a in node.args[:nvars]]
        bound = self._iteration(rng, names)
        try:
            parts = [self.cost(a) for a in node.args[nvars:]]
            if name == "filter":
                elem = self._ident(names[0])
                step = fixed(13)
            else:
                elem = parts[-1]
                step = (fixed(3) if is_map else fixed(12)) + elem.cost
            elem_size = self.size_or_unknown(elem)
        finally:
            for bname in reversed(bound):
                self.pop(bname)
        if filtered:
            step = parts[0].cost + step.union(ONE)
        count = self.size_or_unknown(rng)
        init = fixed(_MAP_CREATE) if is_map else fixed(_LIST_CREATE)
        cost = rng.cost + init + ONE + _times(count, step)
        if is_map:
            return _Info(cost, map_of(DYN, elem.type), size=count)
        entry = _Entry("list", ONE, ZERO.union(elem_size))
        t = list_of(elem.type)
        if name == "filter":
            t = rng.type if rng.type.kind == "list" else list_of(DYN)
        return _Info(cost, t, size=count, entry=entry)

    def _sort_by(self, node: Call) -> _Info:
        assert node.target is not None
        target = self.cost(node.target)
        var = _Var(target.path, self.size(target), target.entry, target.type)
        self.push("@__sortBy_input__", var)
        try:
            elem = (
                target.type.params[0] if target.type.kind == "list" and target.type.params else DYN
            )
            base = () if target.path is None else target.path
            size = target.entry.value if target.entry is not None else None
            name = node.args[0].name if isinstance(node.args[0], Ident) else ""
            self.push(name, _Var((*base, "@items"), size, None, elem))
            try:
                key = self.cost(node.args[1])
            finally:
                self.pop(name)
        finally:
            self.pop("@__sortBy_input__")
        count = self.size_or_unknown(target)
        mapped = ONE + fixed(_LIST_CREATE) + ONE + _times(count, fixed(12) + key.cost)
        factors = (
            [2.0, 2.1]
            if _is_dyn(key.type)
            else [2.1 if key.type.kind in ("string", "bytes") else 2.0]
        )
        sort = _union_all(
            [_times(count, count).factor(f) + ONE + fixed(_LIST_CREATE) for f in factors]
        )
        cost = fixed(_LIST_CREATE) + target.cost + ONE + sort + mapped
        return _Info(cost, target.type, size=count)

    def _opt_map(self, node: Call) -> _Info:
        assert node.target is not None
        target = self.cost(node.target)
        name = node.args[0].name if isinstance(node.args[0], Ident) else ""
        inner = target.type.params[0] if target.type.params else DYN
        self.push(name, _Var(None, None, None, inner))
        try:
            body = self.cost(node.args[1])
        finally:
            self.pop(name)
        has_value = target.cost + ONE
        value = target.cost + ONE
        bound = fixed(_LIST_CREATE) + value + body.cost
        present = ONE + bound if node.function == "optMap" else bound
        return _Info(has_value + present.union(ONE), OPTIONAL)

    # -------------------------------------------------------------- functions
    def _function(self, name: str, target_node: Node | None, arg_nodes: Sequence[Node]) -> _Info:
        args = [self.cost(a) for a in arg_nodes]
        target = self.cost(target_node) if target_node is not None else None
        if target is None and name in ("_&&_", "_||_") and len(args) == 2:
            # Short-circuit: at least the left operand, at most both.
            lhs, rhs = args[0].cost, args[1].cost
            return _Info(Range(lhs.lo, add_u64(lhs.hi, rhs.hi)), BOOL)
        if target is None and name == "_?_:_" and len(args) == 3:
            return self._conditional(args)
        arg_sum = ZERO
        for a in args:
            arg_sum = arg_sum + a.cost
        base = target.cost if target is not None else ZERO
        estimate, result_type, result_size, entry = self._estimate(name, target, args)
        return _Info(base + estimate + arg_sum, result_type, size=result_size, entry=entry)

    def _estimate(
        self, name: str, target: _Info | None, args: list[_Info]
    ) -> tuple[Range, Ty, Range | None, _Entry | None]:
        """The call's own cost (without its arguments), result type, size and entries."""
        k8s = self._kubernetes(name, target, args)
        result = _result_type(name, target, args)
        if k8s is not None:
            cost, size = k8s
            return cost, result, size, None
        return self._builtin(name, target, args, result)

    def _conditional(self, args: list[_Info]) -> _Info:
        cond, then, other = args
        size = self.size_or_unknown(then).union(self.size_or_unknown(other))
        entry = then.entry.union(other.entry) if then.entry is not None else None
        cost = cond.cost + then.cost.union(other.cost)
        return _Info(cost, _join_types(then.type, other.type), size=size, entry=entry)

    def _sizes(self, info: _Info) -> Range:
        """``sizeEstimate`` of the Kubernetes estimator (computed, else declared)."""
        return self.size_or_unknown(info)

    def _element_size(self, target: _Info) -> tuple[Ty, Range] | None:
        """``listElementNode``: the element type of a list (or key type of a map)."""
        if not target.type.params:
            return None
        elem = target.type.params[0]
        path = None if target.path is None or target.accumulator else (*target.path, "@items")
        size = _declared_size(path)
        if size is None:
            size = ONE if _is_scalar(elem) else UNKNOWN
        return elem, size

    def _kubernetes(
        self, name: str, target: _Info | None, args: list[_Info]
    ) -> tuple[Range, Range | None] | None:
        """``library.CostEstimator.EstimateCallCost`` (after the libraries' own estimators)."""
        ext = self._extension(name, target, args)
        if ext is not None:
            return ext
        if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes"):
            if target is None:
                return None
            if target.type.kind == "string" and name in ("indexOf", "lastIndexOf"):
                return self._sizes(target).factor(_STRING_FACTOR), None
            element = self._element_size(target)
            if element is not None:
                elem_type, elem_size = element
                per = ONE
                if elem_type.kind in ("string", "bytes"):
                    per = per + elem_size.factor(_STRING_FACTOR)
                return _times(self._sizes(target), per), None
            if name == "includes":
                return _times(self._sizes(target), ONE), None
            return self._sizes(target).factor(_STRING_FACTOR), None
        if name == "url" and len(args) == 1:
            size = self._sizes(args[0])
            return size.factor(_STRING_FACTOR), size
        if name in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            size = self._sizes(target)
            return size.factor(_STRING_FACTOR), size
        if name == "replace" and target is not None and len(args) >= 2:
            return self._replace(target, args)
        if name == "split" and target is not None:
            size = self._sizes(target)
            hi = size.hi
            if len(args) > 1 and args[1].is_literal and type(args[1].const) is int:
                hi = args[1].const % 2**64
            return size.factor(2 * _STRING_FACTOR), Range(0, hi)
        if name == "join" and target is not None:
            return self._join(target, args)
        if name in ("find", "findAll") and target is not None and args:
            size = self._sizes(target)
            text = (size + ONE).factor(_STRING_FACTOR)
            regex = self._sizes(args[0]).factor(_REGEX_FACTOR)
            return text.times(regex), Range(0, size.hi)
        if name in ("cidr", "isIP", "isCIDR") and args:
            return self._sizes(args[0]).factor(_STRING_FACTOR), None
        if name == "ip":
            if target is not None and target.type == CIDR:
                return ONE, None
            if args:
                return self._sizes(args[0]).factor(_STRING_FACTOR), None
        if name == "ip.isCanonical" and args:
            return self._sizes(args[0]).factor(2 * _STRING_FACTOR), None
        if name in _NOMINAL:
            return ONE, None
        if name in ("containsIP", "containsCIDR") and args:
            ip = Range(4, 16)
            cost = (ip + ip).factor(_STRING_FACTOR)
            if name == "containsCIDR":
                cost = cost + ip.factor(_STRING_FACTOR) + ONE
            parsed = cost + self._sizes(args[0]).factor(_STRING_FACTOR)
            if args[0].type.kind == "string":
                return parsed, None
            if _is_dyn(args[0].type):
                return cost.union(parsed), None
            return cost, None
        if name in ("quantity", "isQuantity", "semver", "isSemver") and args:
            return self._sizes(args[0]).factor(_STRING_FACTOR), None
        if name == "validate" and args:
            size = self._sizes(args[0]).factor(_STRING_FACTOR)
            return size.factor(_MAX_NAME_FORMAT_REGEX * _REGEX_FACTOR), None
        if name in ("_==_", "_!=_") and name == "_==_" and len(args) == 2:
            lhs, rhs = args[0].type, args[1].type
            if lhs == rhs and lhs.kind in _CHEAP_EQUALITY:
                return ONE, None
            if lhs == rhs and lhs == FORMAT:
                return Range(1, _MAX_FORMAT_SIZE).factor(_STRING_FACTOR), None
            if lhs == rhs and lhs == URL:
                return Range(1, 1).factor(_STRING_FACTOR), None
        return None

    def _extension(
        self, name: str, target: _Info | None, args: list[_Info]
    ) -> tuple[Range, Range | None] | None:
        """The estimators ``ext.Lists`` (version 3) and ``ext.Sets`` register per overload."""
        call = ONE
        alloc = fixed(_LIST_CREATE)
        if name in ("sets.contains", "sets.intersects", "sets.equivalent") and len(args) == 2:
            f = 2.0 if name == "sets.equivalent" else 1.0
            both = self._sizes(args[0]).times(self._sizes(args[1]))
            return both.factor(f) + call, None
        if target is not None and target.type.kind in ("list", "dyn", "any"):
            if name == "slice" and len(args) == 2:
                size = self._sizes(target)
                start = _literal_uint(args[0], 0)
                end = _literal_uint(args[1], size.hi)
                result = fixed(max(end - start, 0) % 2**64)
                return result.factor(1) + call + alloc, result
            if name == "flatten" and len(args) <= 1 and _listish(target.type):
                depth = _literal_uint(args[0], U64_MAX) if args else 1
                size = self._sizes(target)
                return size.factor(float(depth)) + call + alloc, size
            if name == "reverse" and not args and _listish(target.type):
                size = self._sizes(target)
                return size.factor(1) + call + alloc, size
            if name == "distinct" and not args and _listish(target.type):
                size = self._sizes(target)
                square = size.times(size)
                return square.factor(2.0) + call + alloc, square
            if name == "sort" and not args and _listish(target.type):
                size = self._sizes(target)
                square = size.times(size)
                elem = target.type.params[0] if target.type.params else DYN
                if _is_dyn(elem):
                    # Every comparable element type's overload: the union of their costs.
                    cost = square.factor(2.0).union(square.factor(2.1))
                else:
                    cost = square.factor(2.1 if elem.kind in ("string", "bytes") else 2.0)
                return cost + call + alloc, square
        if name == "lists.range" and target is None and len(args) == 1:
            result = fixed(_literal_uint(args[0], U64_MAX))
            return result.factor(1) + call + alloc, result
        return None

    def _replace(self, target: _Info, args: list[_Info]) -> tuple[Range, Range | None]:
        size = self._sizes(target)
        old = self._sizes(args[0])
        new = self._sizes(args[1])
        count_hi = count_lo = 0
        kept_hi = kept_lo = 0
        if old.lo == 0:
            count_hi = size.hi + 1 if size.hi < U64_MAX else size.hi
            kept_hi = size.hi
        elif new.hi <= old.lo:
            kept_hi = size.hi
        else:
            count_hi = _ceil_div(size.hi, old.lo)
        if old.hi == 0:
            count_lo = size.lo + 1 if size.lo < U64_MAX else size.lo
            kept_lo = size.lo
        elif old.hi <= new.lo:
            kept_lo = size.lo
        else:
            count_lo = _ceil_div(size.lo, old.hi)
        result = Range(count_lo, count_hi).times(new) + Range(kept_lo, kept_hi)
        return size.factor(2 * _STRING_FACTOR), result

    def _join(self, target: _Info, args: list[_Info]) -> tuple[Range, Range | None]:
        size = ZERO
        items = self._sizes(target)
        element = self._element_size(target)
        if element is not None:
            size = items.times(element[1])
        if args:
            separator = self._sizes(args[0])
            separators = Range(max(items.lo - 1, 0), max(items.hi - 1, 0))
            size = size + separator.times(separators)
        return size.factor(_STRING_FACTOR), size

    def _builtin(
        self, name: str, target: _Info | None, args: list[_Info], result: Ty
    ) -> tuple[Range, Ty, Range | None, _Entry | None]:
        """cel-go's own rules (``coster.functionCost``) for what no estimator priced."""
        if name in ("startsWith", "endsWith") and target is not None and len(args) == 1:
            return self.size_or_unknown(args[0]).factor(_STRING_FACTOR), BOOL, None, None
        if name == "@in" and len(args) == 2:
            container = args[1].type.kind
            in_list = self.size_or_unknown(args[1]).factor(1)
            if container == "list":
                return in_list, BOOL, None, None
            if _is_dyn(args[1].type):
                return in_list.union(ONE), BOOL, None, None
            return ONE, BOOL, None, None
        if name == "matches":
            text, regex = (target, args[0]) if target is not None and args else (None, None)
            if target is None and len(args) == 2:
                text, regex = args[0], args[1]
            if text is not None and regex is not None:
                text_cost = (self.size_or_unknown(text) + ONE).factor(_STRING_FACTOR)
                regex_cost = self.size_or_unknown(regex).factor(_REGEX_FACTOR)
                return text_cost.times(regex_cost), BOOL, None, None
        if name == "contains" and target is not None and len(args) == 1:
            whole = self.size_or_unknown(target).factor(_STRING_FACTOR)
            part = self.size_or_unknown(args[0]).factor(_STRING_FACTOR)
            return whole.times(part), BOOL, None, None
        if name == "format" and target is not None:
            return self.size_or_unknown(target).factor(_STRING_FACTOR), STRING, None, None
        if name == "strings.quote" and len(args) == 1:
            size = self.size_or_unknown(args[0])
            quoted = Range(add_u64(size.lo, 2), add_u64(mul_u64(size.hi, 2), 2))
            return size.factor(_STRING_FACTOR), STRING, quoted, None
        if name in ("bytes", "string") and len(args) == 1 and target is None:
            source = args[0].type.kind
            size = self.size_or_unknown(args[0])
            if name == "bytes" and source == "string":
                return size.factor(_STRING_FACTOR), BYTES, Range(size.lo, mul_u64(size.hi, 4)), None
            if name == "string" and source == "bytes":
                return size.factor(_STRING_FACTOR), STRING, Range(size.lo // 4, size.hi), None
            if source in ("dyn", "any"):
                # A dyn argument resolves to every overload; only the bytes/string one
                # knows its result's size, so that size is the result's.
                cost = size.factor(_STRING_FACTOR).union(ONE)
                if name == "bytes":
                    return cost, BYTES, Range(size.lo, mul_u64(size.hi, 4)), None
                return cost, STRING, Range(size.lo // 4, size.hi), None
        if name == "_+_" and len(args) == 2:
            kinds = {args[0].type.kind, args[1].type.kind}
            lhs, rhs = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
            total = lhs + rhs
            entry = args[0].entry.union(args[1].entry) if args[0].entry is not None else None
            if kinds & {"string", "bytes"} and kinds <= {"string", "bytes", "dyn", "any"}:
                return total.factor(_STRING_FACTOR), result, total, entry
            if "list" in kinds:
                return ONE, result, total, entry
            if kinds <= {"dyn", "any"}:
                # dyn + dyn resolves to every overload: the union covers the string one.
                cost = total.factor(_STRING_FACTOR).union(ONE)
                return cost, result, total, entry
        if name in _ORDERINGS and len(args) == 2:
            kinds = {args[0].type.kind, args[1].type.kind}
            if (
                kinds <= {"string"}
                or kinds <= {"bytes"}
                or (kinds & {"dyn", "any"} and not kinds - {"dyn", "any", "string", "bytes"})
            ):
                sized = self._comparison(args)
                if kinds <= {"string"} or kinds <= {"bytes"}:
                    return sized, BOOL, None, None
                return sized.union(ONE), BOOL, None, None
        if name in ("_==_", "_!=_") and len(args) == 2:
            return self._comparison(args), BOOL, None, None
        return ONE, result, None, None

    def _comparison(self, args: list[_Info]) -> Range:
        lhs, rhs = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
        smallest = min(lhs.hi, rhs.hi)
        return Range(1 if smallest > 0 else 0, smallest).factor(_STRING_FACTOR)


_ORDERINGS: Final = frozenset(("_<_", "_<=_", "_>_", "_>=_"))
_NOMINAL: Final = frozenset(
    (
        "masked",
        "prefixLength",
        "family",
        "isUnspecified",
        "isLoopback",
        "isLinkLocalMulticast",
        "isLinkLocalUnicast",
        "isGlobalUnicast",
        "format.named",
        "sign",
        "asInteger",
        "isInteger",
        "asApproximateFloat",
        "isGreaterThan",
        "isLessThan",
        "compareTo",
        "add",
        "sub",
        "major",
        "minor",
        "patch",
        "getScheme",
        "getHostname",
        "getHost",
        "getPort",
        "getEscapedPath",
        "getQuery",
    )
)


def _listish(t: Ty) -> bool:
    """A list, or a value the checker lets stand for one."""
    return t.kind == "list" or _is_dyn(t)


def _times(count: Range, cost: Range) -> Range:
    """``SizeEstimate.MultiplyByCost``: a per-item cost times an item count."""
    return count.times(cost)


def _union_all(ranges: Sequence[Range]) -> Range:
    out = ranges[0]
    for r in ranges[1:]:
        out = out.union(r)
    return out


def _ceil_div(x: int, y: int) -> int:
    # float64 division as upstream, then ceiling.
    return math.ceil(float(x) / float(y)) if x < U64_MAX else U64_MAX


def _literal_uint(info: _Info, default: int) -> int:
    """``nodeAsUintValue``: an int literal argument (negative as 0), else the default."""
    if not info.is_literal or type(info.const) is not int:
        return default
    return max(info.const, 0)


def _const_type(value: object) -> Ty:
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, UInt):
        return UINT
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return STRING
    if isinstance(value, bytes):
        return BYTES
    if value is None:
        return NULL
    return DYN


def _common_type(types: Sequence[Ty]) -> Ty:
    """The element type of a literal: the shared one, else dyn."""
    known = set(types)
    if len(known) == 1:
        return known.pop()
    return DYN


def _join_types(a: Ty, b: Ty) -> Ty:
    if a == b:
        return a
    if a.kind == b.kind == "list" and a.params and b.params:
        return list_of(_join_types(a.params[0], b.params[0]))
    if a == NULL:
        return b
    if b == NULL:
        return a
    return DYN


_CONVERSIONS: Final[dict[str, Ty]] = {
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "string": STRING,
    "bytes": BYTES,
    "bool": BOOL,
    "size": INT,
    "duration": Ty("google.protobuf.Duration"),
    "timestamp": Ty("google.protobuf.Timestamp"),
    "quantity": QUANTITY,
    "semver": SEMVER,
    "url": URL,
    "ip": IP,
    "cidr": CIDR,
    "masked": CIDR,
    "lists.range": list_of(INT),
    "split": list_of(STRING),
    "join": STRING,
    "strings.quote": STRING,
    "format": STRING,
    "type": Ty("type"),
}
_BOOLEANS: Final = frozenset(
    (
        "_==_",
        "_!=_",
        "!_",
        "@in",
        "hasValue",
        "startsWith",
        "endsWith",
        "contains",
        "matches",
        "sets.contains",
        "sets.intersects",
        "sets.equivalent",
        "isSorted",
        "includes",
        *tuple(_ORDERINGS),
    )
)
_SAME_LIST: Final = frozenset(("sort", "slice", "reverse", "distinct"))


def _result_type(name: str, target: _Info | None, args: list[_Info]) -> Ty:
    """The checker's result type where cost rules depend on it, else dyn."""
    if name in _BOOLEANS:
        return BOOL
    if name in _CONVERSIONS:
        if name == "ip" and target is not None:
            return IP
        return _CONVERSIONS[name]
    operands = [*([target] if target is not None else []), *args]
    if name in _SAME_LIST and target is not None and target.type.kind == "list":
        if name == "sort" and (not target.type.params or _is_dyn(target.type.params[0])):
            return DYN  # one overload per comparable element type: no single result
        return target.type
    if name in ("_+_", "_-_", "_*_", "_/_", "_%_") and len(operands) == 2:
        a, b = operands[0].type, operands[1].type
        if _is_dyn(a) != _is_dyn(b):
            # Only the typed side's overload matches: its type is the result's.
            known = b if _is_dyn(a) else a
            return DYN if known.kind.startswith("google.protobuf.") else known
        return _join_types(a, b)
    if name in ("sum", "min", "max") and target is not None and target.type.kind == "list":
        return target.type.params[0] if target.type.params else DYN
    if name == "-_" and operands:
        return operands[0].type
    if name in ("first", "last") and target is not None and target.type.params:
        return Ty("optional_type", (target.type.params[0],))
    if name == "optional.of" and args:
        return Ty("optional_type", (args[0].type,))
    if name == "value" and target is not None and target.type.kind == "optional_type":
        return target.type.params[0] if target.type.params else DYN
    if name in ("lowerAscii", "upperAscii", "substring", "trim", "replace", "charAt"):
        return STRING
    if name in ("indexOf", "lastIndexOf", "sign", "compareTo", "asInteger", "major"):
        return INT
    if name in ("minor", "patch", "prefixLength", "family", "getPort"):
        return INT if name in ("minor", "patch", "prefixLength", "family") else STRING
    if name in ("add", "sub") and target is not None:
        return target.type
    return DYN


@lru_cache(maxsize=4096)
def _estimate_cached(expression: str, env: Environment) -> Range:
    return _Coster(env).cost(parse(expression)).cost


def estimate_cost(expression: str, env: Environment | None = None) -> Range:
    """The worst-case (``hi``) and best-case (``lo``) cost the API server estimates.

    ``expression`` must compile (see :func:`compile_selector`); the estimate of an
    expression that does not compile is meaningless.
    """
    return _estimate_cached(expression, env or Environment())


def exceeds_cost_limit(expression: str, env: Environment | None = None) -> int | None:
    """The estimated worst-case cost when it is over the API server's limit, else None."""
    worst = estimate_cost(expression, env).hi
    return worst if worst > MAX_SELECTOR_COST else None


__all__ = [
    "MAX_SELECTOR_COST",
    "Environment",
    "Range",
    "estimate_cost",
    "exceeds_cost_limit",
]
