"""Which DRA CEL environment an expression is checked in: the gates that shape it.

The API server compiles a new selector (a create, or a changed selector) in the "new
expressions" environment, where the ``device`` declaration depends on two feature gates:
``DRAConsumableCapacity`` declares ``device.allowMultipleAllocations`` and
``DRAListTypeAttributes`` declares ``includes`` and makes attribute values ``dyn`` (lists can
be iterated) instead of ``any``. Stored expressions (what the allocator evaluates) see
everything. Kubernetes 1.36 and 1.37 gate both the same way and enable the first (beta) and
not the second (alpha) by default; 1.34 and 1.35 have the first as alpha (off by default)
and not the second at all (:func:`release_gates`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: Kubernetes feature gate -> Environment attribute.
CEL_GATES: Final = {
    "DRAConsumableCapacity": "consumable_capacity",
    "DRAListTypeAttributes": "list_type_attributes",
}


@dataclass(frozen=True, slots=True)
class Environment:
    """The gates of the new-expressions environment (defaults: those of 1.36 and 1.37)."""

    consumable_capacity: bool = True
    list_type_attributes: bool = False


#: The first minor release with the DRAListTypeAttributes gate.
LIST_TYPE_ATTRIBUTES_SINCE: Final = 36
#: The first minor release where DRAConsumableCapacity is beta, i.e. on by default.
CONSUMABLE_CAPACITY_BETA_SINCE: Final = 36


def release_gates(kube_minor: int) -> dict[str, bool]:
    """The CEL gates that Kubernetes ``1.<kube_minor>`` knows, each with its default.

    Keys are :class:`Environment` attributes; a gate missing from the result does not
    exist in that release (its API server refuses it in ``--feature-gates``).
    """
    gates = {"consumable_capacity": kube_minor >= CONSUMABLE_CAPACITY_BETA_SINCE}
    if kube_minor >= LIST_TYPE_ATTRIBUTES_SINCE:
        gates["list_type_attributes"] = False
    return gates


__all__ = [
    "CEL_GATES",
    "CONSUMABLE_CAPACITY_BETA_SINCE",
    "LIST_TYPE_ATTRIBUTES_SINCE",
    "Environment",
    "release_gates",
]
