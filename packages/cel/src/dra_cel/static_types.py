"""Full static types of the type check: ``list(int)``, ``map(string, any)``, ``optional_type(T)``.

The compiler tracks each node's kind (``list``, ``map``, ``dyn``, ...) to pick overloads and
closures; these helpers add the parameters that cel-go's checker also looks at: whether the
two sides of ``==`` unify, whether ``in`` finds the element type of its list, whether the
elements of a literal agree (HomogeneousAggregateLiterals). Types are written as cel-go
prints them in its errors, so a message names them the same way.

Example::

    from dra_cel.static_types import assignable, list_of

    assert not assignable(list_of("int"), list_of("double"))
    assert assignable(list_of("int"), list_of("dyn"))
"""

from __future__ import annotations

from typing import Final

#: The element type of an empty literal: cel-go's free type parameter, which unifies with
#: every type (``[] == [1]``) and agrees with every element type (``[[], [1]]``).
FREE: Final = "_var0"

#: Types that match every other one (``any``: an attribute value; ``dyn``).
_WILDCARDS: Final = frozenset(("dyn", "any", FREE))

#: Kinds that ``null`` does not unify with: cel-go's primitives and aggregates (``null ==
#: 1`` fails to check; ``null == timestamp(...)`` and ``null == quantity(...)`` check).
_NOT_NULLABLE: Final = frozenset(
    ("bool", "int", "uint", "double", "string", "bytes", "list", "map")
)

#: How cel-go names the types this package spells with their proto names.
_SHOWN: Final = {
    "google.protobuf.Timestamp": "timestamp",
    "google.protobuf.Duration": "duration",
    "null_type": "null",
}


def kind(t: str) -> str:
    """The type without its parameters: ``list(int)`` -> ``list``."""
    return t.split("(", 1)[0]


def params(t: str) -> tuple[str, ...]:
    """The parameters of a type: ``map(string, list(int))`` -> ``("string", "list(int)")``."""
    open_at = t.find("(")
    if open_at < 0:
        return ()
    inner = t[open_at + 1 : -1]
    out: list[str] = []
    depth = 0
    start = 0
    for i, c in enumerate(inner):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(inner[start:i].strip())
            start = i + 1
    out.append(inner[start:].strip())
    return tuple(out)


def list_of(elem: str) -> str:
    """``list(elem)``."""
    return f"list({elem})"


def map_of(key: str, value: str) -> str:
    """``map(key, value)``."""
    return f"map({key}, {value})"


def optional_of(inner: str) -> str:
    """``optional_type(inner)``."""
    return f"optional_type({inner})"


def element(t: str) -> str:
    """What iterating over ``t`` yields: a list's elements, a map's keys, else dyn."""
    p = params(t)
    if kind(t) in ("list", "map") and p:
        return p[0]
    return "dyn"


def value_of(t: str) -> str:
    """What indexing ``t`` yields: a list's elements, a map's values, else dyn."""
    p = params(t)
    if kind(t) == "list" and p:
        return p[0]
    if kind(t) == "map" and len(p) == 2:
        return p[1]
    if kind(t) == "optional_type" and p:
        return optional_of(value_of(p[0]))
    return "dyn"


def is_wildcard(t: str) -> bool:
    """Whether ``t`` matches every type (dyn, an attribute's ``any``, a free parameter)."""
    return t in _WILDCARDS


def assignable(a: str, b: str) -> bool:
    """Whether cel-go's checker unifies ``a`` and ``b`` (both sides of ``==``, of ``?:``)."""
    if a == b or is_wildcard(a) or is_wildcard(b):
        return True
    ka, kb = kind(a), kind(b)
    if "null_type" in (ka, kb):
        other = kb if ka == "null_type" else ka
        return other not in _NOT_NULLABLE
    if ka != kb:
        return False
    if ka == "type":
        return True  # any two type values compare (``type(1) == type('a')`` checks)
    pa, pb = params(a), params(b)
    if not pa or not pb:
        return True  # a kind whose parameters are not tracked here
    return len(pa) == len(pb) and all(assignable(x, y) for x, y in zip(pa, pb, strict=True))


def equivalent(a: str, b: str) -> bool:
    """Whether two element types of one literal agree: equal, up to free parameters."""
    if a == b or FREE in (a, b):
        return True
    pa, pb = params(a), params(b)
    if kind(a) != kind(b) or len(pa) != len(pb) or not pa:
        return False
    return all(equivalent(x, y) for x, y in zip(pa, pb, strict=True))


def most_general(a: str, b: str) -> str:
    """Of two unifying types, the one cel-go's checker keeps (``mostGeneral``): dyn or
    any over a specific type, a specific type over a free parameter."""
    if a == FREE:
        return b
    if b == FREE or is_wildcard(a):
        return a
    if is_wildcard(b):
        return b
    pa, pb = params(a), params(b)
    if kind(a) == kind(b) and pa and len(pa) == len(pb):
        joined = ", ".join(most_general(x, y) for x, y in zip(pa, pb, strict=True))
        return f"{kind(a)}({joined})"
    return a


def shown(t: str) -> str:
    """``t`` as cel-go prints it in an error (``timestamp``, ``null``)."""
    p = params(t)
    if not p:
        return _SHOWN.get(t, t)
    return f"{_SHOWN.get(kind(t), kind(t))}({', '.join(shown(x) for x in p)})"
