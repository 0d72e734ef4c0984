"""The text of a ``DRAUnsatisfiable`` Event: the closest node and what fails there.

From the allocator's diagnosis of a pending claim: the node missing the fewest devices
is the closest; its first short request is named with the selector that rejected most of
its devices, or the first reason otherwise. A selector comparing a capacity with a
quantity (``device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0``)
is reported as the gap: ``memory >= 40Gi: best node n3 has 16Gi``, the best node there
being the one whose best device comes nearest. The gap is computed by
:mod:`dra_allocator.gaps`, which ``kubectl dra explain`` uses too.
"""

from __future__ import annotations

from dra_allocator.explain import ClaimDiagnosis
from dra_allocator.gaps import closest_node, selector_gap, shortfall_text

#: Events carry at most this many characters of message (the API allows 1 KiB).
MAX_MESSAGE = 1000


def unsatisfiable_message(diag: ClaimDiagnosis) -> str | None:
    """The Event message for a claim no node can take, or None if some node can."""
    if any(d.allocatable for d in diag.nodes):
        return None
    closest = closest_node(diag.nodes)
    if closest is None:
        return f"ResourceClaim {diag.claim} cannot be allocated: no node has DRA devices"
    head = f"ResourceClaim {diag.claim} cannot be allocated on any of {len(diag.nodes)} node(s)"
    if closest.shortfalls:
        shortfall = closest.shortfalls[0]
        gap = selector_gap(shortfall.request, diag.nodes)
        if gap is not None:
            text = f"{head}: request {shortfall.request}: {gap.node_text()}"
        else:
            detail = shortfall.details[0].strip() if shortfall.details else ""
            text = f"{head}; closest node {closest.node}: {shortfall_text(shortfall)}"
            if detail:
                text += f": {detail}"
    else:
        detail = closest.error or next(iter(closest.reasons), "no usable devices")
        text = f"{head}; closest node {closest.node}: {detail.strip()}"
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."
