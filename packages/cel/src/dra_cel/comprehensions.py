"""The loops behind CEL's comprehension macros (``all``, ``exists``, ``exists_one``,
``map``, ``filter`` and the two-variable ``transformList``/``transformMap``/``existsOne``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .errors import CelCostLimitError, CelRuntimeError
from .runtime import COST_LIMIT, Fn, Frame, charge
from .values import no_overload


def comprehension_body(
    name: str, nvars: int, slots: list[int], fns: list[Fn], step_cost: int
) -> Callable[[Frame, Any, bool], Any]:
    """The loop of macro ``name`` over (key, value) pairs, charging ``step_cost`` each step.

    ``all``/``exists`` absorb errors the way ``&&``/``||`` do (a later false/true
    decides); the others propagate the first error.
    """
    first_slot = slots[0]
    second_slot = slots[1] if nvars == 2 else 0

    def bind(frame: Frame, key: Any, value: Any, single_is_value: bool) -> None:
        frame[1] += step_cost
        if frame[1] > COST_LIMIT:
            charge(frame, 0)
        if nvars == 1:
            frame[first_slot] = value if single_is_value else key
        else:
            frame[first_slot] = key
            frame[second_slot] = value

    if name in ("all", "exists"):
        pred = fns[0]
        stop = name == "exists"

        def quantifier(frame: Frame, pairs: Any, single_is_value: bool) -> Any:
            error: CelRuntimeError | None = None
            for key, value in pairs:
                bind(frame, key, value, single_is_value)
                try:
                    result = pred(frame)
                except CelCostLimitError:
                    raise
                except CelRuntimeError as err:
                    if error is None:
                        error = err
                    continue
                if result is stop:
                    return stop
                if result is not True and result is not False and error is None:
                    error = no_overload("_&&_" if not stop else "_||_", result)
            if error is not None:
                raise error
            return not stop

        return quantifier
    if name in ("exists_one", "existsOne"):
        pred = fns[0]

        def exists_one(frame: Frame, pairs: Any, single_is_value: bool) -> Any:
            count = 0
            for key, value in pairs:
                bind(frame, key, value, single_is_value)
                result = pred(frame)
                if result is True:
                    count += 1
                elif result is not False:
                    raise no_overload("_?_:_", result)
            return count == 1

        return exists_one
    if name == "filter":
        pred = fns[0]

        def filter_fn(frame: Frame, pairs: Any, single_is_value: bool) -> Any:
            out = []
            for key, value in pairs:
                bind(frame, key, value, single_is_value)
                result = pred(frame)
                if result is True:
                    out.append(frame[first_slot])
                elif result is not False:
                    raise no_overload("_?_:_", result)
            return out

        return filter_fn
    if name in ("map", "transformList", "transformMap"):
        transform = fns[-1]
        predicate = fns[0] if len(fns) == 2 else None
        to_map = name == "transformMap"

        def transform_fn(frame: Frame, pairs: Any, single_is_value: bool) -> Any:
            out_list = []
            out_map: dict[Any, Any] = {}
            for key, value in pairs:
                bind(frame, key, value, single_is_value)
                if predicate is not None:
                    keep = predicate(frame)
                    if keep is False:
                        continue
                    if keep is not True:
                        raise no_overload("_?_:_", keep)
                if to_map:
                    out_map[key] = transform(frame)
                else:
                    out_list.append(transform(frame))
            return out_map if to_map else out_list

        return transform_fn
    raise AssertionError(name)  # pragma: no cover
