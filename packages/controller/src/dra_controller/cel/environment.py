"""Which DRA CEL environment an expression is checked in: the gates that shape it.

The API server compiles a new selector (a create, or a changed selector) in the "new
expressions" environment, where the ``device`` declaration depends on two feature gates:
``DRAConsumableCapacity`` declares ``device.allowMultipleAllocations`` and
``DRAListTypeAttributes`` declares ``includes`` and makes attribute values ``dyn`` (lists can
be iterated) instead of ``any``. Stored expressions (what the allocator evaluates) see
everything. Kubernetes 1.36 and 1.37 gate both the same way and enable the first (beta) and
not the second (alpha) by default.
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


__all__ = ["CEL_GATES", "Environment"]
