"""The function registry: every overload with its static signature and runtime cost.

The ``lib_*`` modules fill it through :func:`define`; the compiler resolves calls
against it, statically where argument types are known and at runtime otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from .values import type_name

DYN: Final = "dyn"
SEMVER: Final = "kubernetes.Semver"
QUANTITY: Final = "kubernetes.Quantity"
OPTIONAL: Final = "optional_type"
DEVICE: Final = "kubernetes.DRADevice"


@dataclass(frozen=True, slots=True)
class Overload:
    """One overload: ``params`` includes the receiver first for method-style calls."""

    name: str
    receiver: bool
    params: tuple[str, ...]
    result: str
    impl: Callable[..., Any]
    cost: Callable[..., int] | None = None

    def accepts_static(self, types: tuple[str, ...]) -> bool:
        """Whether statically known argument types can reach this overload."""
        pairs = zip(self.params, types, strict=True)
        return all(p in (DYN, t) or t == DYN for p, t in pairs)

    def accepts(self, args: tuple[Any, ...]) -> bool:
        """Whether runtime argument values select this overload."""
        return all(p == DYN or type_name(a) == p for p, a in zip(self.params, args, strict=True))


FUNCTIONS: dict[str, list[Overload]] = {}


def define(
    name: str,
    params: tuple[str, ...],
    result: str,
    impl: Callable[..., Any],
    *,
    receiver: bool = True,
    cost: Callable[..., int] | None = None,
) -> None:
    """Register an overload; ``cost`` prices one call from its arguments."""
    FUNCTIONS.setdefault(name, []).append(
        Overload(name, receiver=receiver, params=params, result=result, impl=impl, cost=cost)
    )


def str_cost(s: Any, t: Any = "", *_: Any) -> int:
    """Traversal cost of the string receiver (and string argument), 0.1 per character."""
    return 1 + (len(s) + (len(t) if type(t) is str else 0)) // 10


def list_cost(items: Any, *_: Any) -> int:
    """Traversal cost of a list (or map) receiver: one per element."""
    return 1 + (len(items) if isinstance(items, list | dict) else 0)
