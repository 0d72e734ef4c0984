"""The functions of the DRA CEL environment.

The set is upstream's base environment as DRA uses it: the CEL standard functions
(timestamps and durations included),
``ext.Strings`` (version 2), ``ext.Sets``, ``ext.Lists`` (version 3), the Kubernetes
list, regex, quantity, semver (version 1), IP, CIDR, URL and format libraries,
optional values, and DRA's ``includes``.
Macros (``has``, ``all``, ``exists``, ``exists_one``, ``map``, ``filter``, ``sortBy``,
``cel.bind``, ``optMap``, ``optFlatMap``, two-variable comprehensions) and operators
live in the compiler. Importing this module registers every function.
"""

from __future__ import annotations

from typing import Final

from . import (
    lib_dra,
    lib_format,
    lib_kubernetes,
    lib_lists,
    lib_network,
    lib_standard,
    lib_strings,
    lib_time,
    lib_url,
)
from .lib_lists import sorted_by_keys
from .overloads import DYN, FUNCTIONS, OPTIONAL, QUANTITY, SEMVER, Overload
from .values import TYPES, CelType

#: Identifiers that name types (``type(x) == int``).
TYPE_IDENTS: Final[dict[str, CelType]] = dict(TYPES)

LIBRARIES: Final = (
    lib_standard,
    lib_time,
    lib_strings,
    lib_lists,
    lib_kubernetes,
    lib_network,
    lib_url,
    lib_format,
    lib_dra,
)

__all__ = [
    "DYN",
    "FUNCTIONS",
    "LIBRARIES",
    "OPTIONAL",
    "QUANTITY",
    "SEMVER",
    "TYPE_IDENTS",
    "Overload",
    "sorted_by_keys",
]
