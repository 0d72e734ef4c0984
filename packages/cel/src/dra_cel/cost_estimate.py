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

from collections.abc import Sequence
from functools import lru_cache
from typing import Final

from .cost_functions import LIST_CREATE, MAP_CREATE, FunctionCosts, times
from .cost_ranges import ONE, U64_MAX, ZERO, Range, add_u64, fixed
from .cost_types import (
    ANY,
    BOOL,
    DEVICE,
    DYN,
    FORMAT,
    INT,
    OPTIONAL,
    QUANTITY,
    SCALARS,
    SEMVER,
    STRING,
    URL,
    Entry,
    Info,
    Ty,
    Var,
    common_type,
    const_type,
    is_dyn,
    join_types,
    list_of,
    map_of,
)
from .environment import Environment
from .syntax import Call, Const, Ident, Index, ListLit, MapLit, Node, Select, parse

#: Upstream's CELSelectorExpressionMaxCost.
MAX_SELECTOR_COST: Final = 1_000_000

_STRUCTS: Final = frozenset(
    (DEVICE.kind, QUANTITY.kind, SEMVER.kind, URL.kind, FORMAT.kind)
)  # cel.ObjectType: selecting a field of one costs 1 like a map

_ACCU: Final = "@result"


class _Coster(FunctionCosts):
    def __init__(self, env: Environment) -> None:
        self.env = env
        self.scopes: dict[str, list[Var]] = {}

    # -------------------------------------------------------------- scopes
    def push(self, name: str, var: Var) -> None:
        self.scopes.setdefault(name, []).append(var)

    def pop(self, name: str) -> None:
        self.scopes[name].pop()

    def peek(self, name: str) -> Var | None:
        stack = self.scopes.get(name)
        return stack[-1] if stack else None

    # -------------------------------------------------------------- walk
    def cost(self, node: Node) -> Info:
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

    def _const(self, value: object) -> Info:
        t = const_type(value)
        size: Range | None = None
        if isinstance(value, (str, bytes)):
            size = fixed(len(value))
        elif t.kind in SCALARS or value is None:
            size = ONE
        return Info(ZERO, t, size=size, const=value, is_literal=True)

    def _ident(self, name: str) -> Info:
        var = self.peek(name)
        if var is not None:
            return Info(ONE, var.type, path=var.path, size=var.size, entry=var.entry)
        if name == "device":
            return Info(ONE, DEVICE, path=("device",))
        # A type name (int, string, ...): a constant of type "type".
        return Info(ONE, Ty("type"))

    def _select(self, node: Select) -> Info:
        operand = self.cost(node.operand)
        if node.optional:
            # x.?f is the call _?._(x, "f"): one for the call.
            return Info(operand.cost + ONE, OPTIONAL)
        cost = operand.cost
        if operand.type.kind == "map" or operand.type.kind in _STRUCTS:
            cost = cost + ONE
        path = (*operand.path, node.field) if operand.path is not None else (node.field,)
        return Info(cost, self._field_type(operand.type, node.field), path=path)

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

    def _index(self, node: Index) -> Info:
        operand = self.cost(node.operand)
        index = self.cost(node.index)
        cost = operand.cost + index.cost + ONE
        if node.optional:
            return Info(cost, OPTIONAL)
        t = operand.type
        if t.kind == "list" and t.params:
            suffix, result = "@items", t.params[0]
        elif t.kind == "map" and len(t.params) == 2:
            suffix, result = "@values", t.params[1]
        else:
            suffix, result = "@values", DYN
        base = () if operand.path is None else operand.path
        info = Info(cost, result, path=(*base, suffix))
        if operand.entry is not None:
            info.size = operand.entry.value
        return info

    def _list(self, elements: list[Info]) -> Info:
        cost = fixed(LIST_CREATE)
        item = Range(0, 0) if not elements else Range(U64_MAX, 0)
        for e in elements:
            cost = cost + e.cost
            item = item.union(self.size_or_unknown(e))
        return Info(
            cost,
            list_of(common_type([e.type for e in elements])),
            size=fixed(len(elements)),
            entry=Entry("list", ONE, item),
            is_literal=True,
        )

    def _map(self, node: MapLit) -> Info:
        cost = fixed(MAP_CREATE)
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
        return Info(
            cost,
            map_of(common_type(keys), common_type(values)),
            size=fixed(len(node.keys)),
            entry=Entry("map", key_size, value_size),
            is_literal=True,
        )

    # -------------------------------------------------------------- calls
    def _call(self, node: Call) -> Info:
        name = node.function
        target = node.target
        if target is None:
            if name == "has":
                return self._has(node)
            if name == "dyn" and len(node.args) == 1:
                arg = self.cost(node.args[0])
                return Info(arg.cost + ONE, DYN, size=self.size(arg), entry=arg.entry)
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

    def _has(self, node: Call) -> Info:
        arg = node.args[0]
        assert isinstance(arg, Select)
        # Presence tests are free in Kubernetes (PresenceTestHasCost(false)).
        return Info(self.cost(arg.operand).cost, BOOL)

    def _bind(self, node: Call) -> Info:
        name_node, init_node, body_node = node.args
        assert isinstance(name_node, Ident)
        init = self.cost(init_node)
        self.push(name_node.name, Var(init.path, self.size(init), init.entry, init.type))
        try:
            body = self.cost(body_node)
        finally:
            self.pop(name_node.name)
        # The bind's empty iteration range is still a list creation.
        cost = fixed(LIST_CREATE) + init.cost + body.cost
        return Info(cost, body.type, size=self.size(body), entry=body.entry)

    def _iteration(self, rng: Info, names: Sequence[str]) -> list[str]:
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
                self.push(names[0], Var((*base, "@items"), size, None, elem))
            else:
                size = entry.key if entry is not None else None
                self.push(names[0], Var((*base, "@keys"), size, None, key_t))
        else:
            if is_list:
                key_size = entry.key if entry is not None else None
                value_size = entry.value if entry is not None else None
                self.push(names[0], Var((*base, "@indices"), key_size, None, INT))
                self.push(names[1], Var((*base, "@items"), value_size, None, elem))
            else:
                key_size = entry.key if entry is not None else None
                value_size = entry.value if entry is not None else None
                self.push(names[0], Var((*base, "@keys"), key_size, None, key_t))
                self.push(names[1], Var((*base, "@values"), value_size, None, value_t))
        return list(names)

    def _quantifier(self, node: Call) -> Info:
        name = node.function
        nvars = len(node.args) - 1

        def body(parts: list[Info]) -> tuple[Range, Range]:
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
        loop = times(self.size_or_unknown(rng), step + condition)
        result = fixed(2) if name in ("exists_one", "existsOne") else ONE
        return Info(rng.cost + result + loop, BOOL, size=ONE)

    def _transform(self, node: Call) -> Info:
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
        init = fixed(MAP_CREATE) if is_map else fixed(LIST_CREATE)
        cost = rng.cost + init + ONE + times(count, step)
        if is_map:
            return Info(cost, map_of(DYN, elem.type), size=count)
        entry = Entry("list", ONE, ZERO.union(elem_size))
        t = list_of(elem.type)
        if name == "filter":
            t = rng.type if rng.type.kind == "list" else list_of(DYN)
        return Info(cost, t, size=count, entry=entry)

    def _sort_by(self, node: Call) -> Info:
        assert node.target is not None
        target = self.cost(node.target)
        var = Var(target.path, self.size(target), target.entry, target.type)
        self.push("@__sortBy_input__", var)
        try:
            elem = (
                target.type.params[0] if target.type.kind == "list" and target.type.params else DYN
            )
            base = () if target.path is None else target.path
            size = target.entry.value if target.entry is not None else None
            name = node.args[0].name if isinstance(node.args[0], Ident) else ""
            self.push(name, Var((*base, "@items"), size, None, elem))
            try:
                key = self.cost(node.args[1])
            finally:
                self.pop(name)
        finally:
            self.pop("@__sortBy_input__")
        count = self.size_or_unknown(target)
        mapped = ONE + fixed(LIST_CREATE) + ONE + times(count, fixed(12) + key.cost)
        factors = (
            [2.0, 2.1]
            if is_dyn(key.type)
            else [2.1 if key.type.kind in ("string", "bytes") else 2.0]
        )
        sort = _union_all(
            [times(count, count).factor(f) + ONE + fixed(LIST_CREATE) for f in factors]
        )
        cost = fixed(LIST_CREATE) + target.cost + ONE + sort + mapped
        return Info(cost, target.type, size=count)

    def _opt_map(self, node: Call) -> Info:
        assert node.target is not None
        target = self.cost(node.target)
        name = node.args[0].name if isinstance(node.args[0], Ident) else ""
        inner = target.type.params[0] if target.type.params else DYN
        self.push(name, Var(None, None, None, inner))
        try:
            body = self.cost(node.args[1])
        finally:
            self.pop(name)
        has_value = target.cost + ONE
        value = target.cost + ONE
        bound = fixed(LIST_CREATE) + value + body.cost
        present = ONE + bound if node.function == "optMap" else bound
        return Info(has_value + present.union(ONE), OPTIONAL)

    # -------------------------------------------------------------- functions
    def _function(self, name: str, target_node: Node | None, arg_nodes: Sequence[Node]) -> Info:
        args = [self.cost(a) for a in arg_nodes]
        target = self.cost(target_node) if target_node is not None else None
        if target is None and name in ("_&&_", "_||_") and len(args) == 2:
            # Short-circuit: at least the left operand, at most both.
            lhs, rhs = args[0].cost, args[1].cost
            return Info(Range(lhs.lo, add_u64(lhs.hi, rhs.hi)), BOOL)
        if target is None and name == "_?_:_" and len(args) == 3:
            return self._conditional(args)
        arg_sum = ZERO
        for a in args:
            arg_sum = arg_sum + a.cost
        base = target.cost if target is not None else ZERO
        estimate, result_type, result_size, entry = self._estimate(name, target, args)
        return Info(base + estimate + arg_sum, result_type, size=result_size, entry=entry)

    def _conditional(self, args: list[Info]) -> Info:
        cond, then, other = args
        size = self.size_or_unknown(then).union(self.size_or_unknown(other))
        entry = then.entry.union(other.entry) if then.entry is not None else None
        cost = cond.cost + then.cost.union(other.cost)
        return Info(cost, join_types(then.type, other.type), size=size, entry=entry)


def _union_all(ranges: Sequence[Range]) -> Range:
    out = ranges[0]
    for r in ranges[1:]:
        out = out.union(r)
    return out


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
