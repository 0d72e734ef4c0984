"""The types and sizes the cost estimate tracks, and the result types its rules depend on.

A :class:`Ty` is a CEL type as far as cost rules look at it; DRA's declared maximum sizes
(``k8s.io/dynamic-resource-allocation/cel``) bound what is reached from ``device``; an
:class:`Info` is what the walk learned about one node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from .cost_ranges import Range
from .syntax import UInt

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
SCALARS: Final = frozenset(("bool", "double", "google.protobuf.Duration", "int", "uint"))
_SCALARS_ALL: Final = SCALARS | {"google.protobuf.Timestamp"}


def list_of(elem: Ty) -> Ty:
    """``list(elem)``."""
    return Ty("list", (elem,))


def map_of(key: Ty, value: Ty) -> Ty:
    """``map(key, value)``."""
    return Ty("map", (key, value))


def is_dyn(t: Ty) -> bool:
    """Whether the type is unknown until run time (``dyn``, or the checker's ``any``)."""
    return t.kind in ("dyn", "any")


def is_scalar(t: Ty) -> bool:
    """Whether a value of the type has size one in the cost model (a scalar, or an optional
    of one)."""
    if t.kind in _SCALARS_ALL:
        return True
    return t.kind == "optional_type" and bool(t.params) and is_scalar(t.params[0])


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


def declared_size(path: Sequence[str] | None) -> Range | None:
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
class Entry:
    """What is known of a container's entries: its kind and the key and value sizes."""

    kind: str
    key: Range
    value: Range

    def union(self, other: Entry | None) -> Entry | None:
        """What is known of the entries of either container (``None``: nothing)."""
        if other is None:
            return None
        return Entry(self.kind, self.key.union(other.key), self.value.union(other.value))


@dataclass(slots=True)
class Var:
    """What is known of a variable a macro binds: its path, size, entries and type."""

    path: tuple[str, ...] | None
    size: Range | None
    entry: Entry | None
    type: Ty


@dataclass(slots=True)
class Info:
    """What the walk learned about one node."""

    cost: Range
    type: Ty
    path: tuple[str, ...] | None = None
    size: Range | None = None
    entry: Entry | None = None
    const: object = None
    is_literal: bool = False
    accumulator: bool = False


ORDERINGS: Final = frozenset(("_<_", "_<=_", "_>_", "_>=_"))


def listish(t: Ty) -> bool:
    """A list, or a value the checker lets stand for one."""
    return t.kind == "list" or is_dyn(t)


def const_type(value: object) -> Ty:
    """The CEL type of a literal's value."""
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


def common_type(types: Sequence[Ty]) -> Ty:
    """The element type of a literal: the shared one, else dyn."""
    known = set(types)
    if len(known) == 1:
        return known.pop()
    return DYN


def join_types(a: Ty, b: Ty) -> Ty:
    """The type of a conditional whose branches have these types: their own when the same, a list
    of the joined element types, the other one where one is null, else dyn."""
    if a == b:
        return a
    if a.kind == b.kind == "list" and a.params and b.params:
        return list_of(join_types(a.params[0], b.params[0]))
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
        *tuple(ORDERINGS),
    )
)
_SAME_LIST: Final = frozenset(("sort", "slice", "reverse", "distinct"))


def result_type(name: str, target: Info | None, args: list[Info]) -> Ty:
    """The checker's result type where cost rules depend on it, else dyn."""
    if name in _BOOLEANS:
        return BOOL
    if name in _CONVERSIONS:
        if name == "ip" and target is not None:
            return IP
        return _CONVERSIONS[name]
    operands = [*([target] if target is not None else []), *args]
    if name in _SAME_LIST and target is not None and target.type.kind == "list":
        if name == "sort" and (not target.type.params or is_dyn(target.type.params[0])):
            return DYN  # one overload per comparable element type: no single result
        return target.type
    if name in ("_+_", "_-_", "_*_", "_/_", "_%_") and len(operands) == 2:
        a, b = operands[0].type, operands[1].type
        if is_dyn(a) != is_dyn(b):
            # Only the typed side's overload matches: its type is the result's.
            known = b if is_dyn(a) else a
            return DYN if known.kind.startswith("google.protobuf.") else known
        return join_types(a, b)
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
