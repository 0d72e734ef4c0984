"""Functions only the DRA environment declares: ``includes`` (Kubernetes 1.36,
list-valued attributes)."""

from __future__ import annotations

from typing import Any, Final

from .errors import CelRuntimeError
from .overloads import DYN, define, list_cost
from .values import cel_equals

#: resource.k8s.io ResourceSliceMaxAttributeValuesPerDevice: ``includes`` refuses longer
#: lists so that its cost stays bounded.
MAX_ATTRIBUTE_VALUES: Final = 48


def _includes(target: Any, value: Any) -> bool:
    # A list attribute includes the value if any element equals it; a scalar attribute
    # "includes" only itself, so one expression serves both forms of an attribute.
    if type(target) is list:
        for i, item in enumerate(target):
            if i >= MAX_ATTRIBUTE_VALUES:
                raise CelRuntimeError(
                    "'includes' function cannot be applied to lists longer than "
                    f"{MAX_ATTRIBUTE_VALUES} values"
                )
            if cel_equals(item, value):
                return True
        return False
    return cel_equals(target, value)


define("includes", (DYN, DYN), "bool", _includes, cost=list_cost)
