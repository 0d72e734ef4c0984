"""Closures for function calls and for comparisons against numeric constants."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from dra_api_types import Quantity, Version

from .device import CelDevice, DomainMap
from .errors import CelRuntimeError
from .formats import FORMAT_TYPE, NamedFormat
from .network import CIDR, CIDR_TYPE, IP, IP_TYPE
from .overloads import DEVICE, OPTIONAL, QUANTITY, SEMVER
from .runtime import COST_LIMIT, Fn, Frame, charge
from .syntax import UInt
from .temporal import DURATION_TYPE, TIMESTAMP_TYPE, Duration, Timestamp
from .urls import URL, URL_TYPE
from .values import NUMBER_CLASSES, CelType, Optional, no_overload

#: Python classes standing for each static CEL type, for runtime argument checks.
PY_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "bool": (bool,),
    "int": (int,),
    "uint": (UInt,),
    "double": (float,),
    "string": (str,),
    "bytes": (bytes,),
    "null_type": (type(None),),
    "list": (list,),
    "map": (dict, DomainMap),
    SEMVER: (Version,),
    QUANTITY: (Quantity,),
    OPTIONAL: (Optional,),
    "type": (CelType,),
    DEVICE: (CelDevice,),
    IP_TYPE: (IP,),
    CIDR_TYPE: (CIDR,),
    TIMESTAMP_TYPE: (Timestamp,),
    DURATION_TYPE: (Duration,),
    URL_TYPE: (URL,),
    FORMAT_TYPE: (NamedFormat,),
}


def relation_with_number(name: str, lf: Fn, c: Any) -> Fn | None:
    """``x < 5`` and friends: numbers compare directly, anything else is no overload."""
    if name == "_<_":

        def lt(frame: Frame) -> Any:
            x = lf(frame)
            if type(x) in NUMBER_CLASSES:
                return x < c
            raise no_overload(name, x, c)

        return lt
    if name == "_<=_":

        def le(frame: Frame) -> Any:
            x = lf(frame)
            if type(x) in NUMBER_CLASSES:
                return x <= c
            raise no_overload(name, x, c)

        return le
    if name == "_>_":

        def gt(frame: Frame) -> Any:
            x = lf(frame)
            if type(x) in NUMBER_CLASSES:
                return x > c
            raise no_overload(name, x, c)

        return gt
    if name == "_>=_":

        def ge(frame: Frame) -> Any:
            x = lf(frame)
            if type(x) in NUMBER_CLASSES:
                return x >= c
            raise no_overload(name, x, c)

        return ge
    return None


_WRAPPED_ERRORS: Final = (
    ValueError,
    TypeError,
    OverflowError,
    ArithmeticError,
    IndexError,
    KeyError,
    AttributeError,
)


def direct_call(
    name: str,
    impl: Callable[..., Any],
    fns: tuple[Fn, ...],
    guards: tuple[tuple[type, ...] | None, ...],
    cost: Callable[..., int] | None,
) -> Fn:
    """A call of one known overload, specialised for the common arities."""
    if len(fns) == 1:
        (f0,) = fns
        (g0,) = guards

        def call1(frame: Frame) -> Any:
            a = f0(frame)
            if g0 is not None and type(a) not in g0:
                raise no_overload(name, a)
            if cost is not None:
                frame[1] += cost(a)
                if frame[1] > COST_LIMIT:
                    charge(frame, 0)
            try:
                return impl(a)
            except CelRuntimeError:
                raise
            except _WRAPPED_ERRORS as err:
                raise CelRuntimeError(f"{name}: {err}") from None

        return call1
    if len(fns) == 2:
        f0, f1 = fns
        g0, g1 = guards

        def call2(frame: Frame) -> Any:
            a = f0(frame)
            b = f1(frame)
            if (g0 is not None and type(a) not in g0) or (g1 is not None and type(b) not in g1):
                raise no_overload(name, a, b)
            if cost is not None:
                frame[1] += cost(a, b)
                if frame[1] > COST_LIMIT:
                    charge(frame, 0)
            try:
                return impl(a, b)
            except CelRuntimeError:
                raise
            except _WRAPPED_ERRORS as err:
                raise CelRuntimeError(f"{name}: {err}") from None

        return call2
    checks = tuple((i, g) for i, g in enumerate(guards) if g is not None)

    def call(frame: Frame) -> Any:
        args = [f(frame) for f in fns]
        for i, g in checks:
            if type(args[i]) not in g:
                raise no_overload(name, *args)
        if cost is not None:
            charge(frame, cost(*args))
        return invoke(name, impl, tuple(args))

    return call


def invoke(name: str, impl: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """Call a function's implementation; the Python errors a bad argument raises come back as
    the CEL runtime error naming the function."""
    try:
        return impl(*args)
    except CelRuntimeError:
        raise
    except _WRAPPED_ERRORS as err:
        raise CelRuntimeError(f"{name}: {err}") from None
