"""The text of a ``DRAUnsatisfiable`` Event: the closest node and what fails there.

From the allocator's diagnosis of a pending claim: the node missing the fewest devices
is the closest; its first short request is named with the selector that rejected most of
its devices, or the first reason otherwise. A selector comparing a capacity with a
quantity (``device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0``)
is reported as the gap: ``memory >= 40Gi: best node n3 has 16Gi``, the best node there
being the one whose best device comes nearest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from dra_allocator.explain import ClaimDiagnosis, NodeDiagnosis, RequestShortfall
from dra_allocator.model import DeviceInfo
from dra_api_types import Amount, Quantity, QuantityError, QuantityFormat

#: Events carry at most this many characters of message (the API allows 1 KiB).
MAX_MESSAGE = 1000

_QUOTED = r"""['"]([^'"]+)['"]"""
_COMPARE_TO = re.compile(
    rf"device\.capacity\[\s*{_QUOTED}\s*\]\.(\w+)\.compareTo\(\s*quantity\(\s*{_QUOTED}\s*\)\s*\)"
    r"\s*(>=|<=|==|>|<)\s*0"
)
_IS_GREATER = re.compile(
    rf"device\.capacity\[\s*{_QUOTED}\s*\]\.(\w+)\.(isGreaterThan|isLessThan)\(\s*quantity\(\s*{_QUOTED}\s*\)\s*\)"
)


@dataclass(frozen=True, slots=True)
class CapacityBound:
    """``<capacity> <op> <quantity>`` found in a selector."""

    domain: str
    name: str
    op: str
    bound: Amount
    text: str

    def holds(self, value: Amount) -> bool:
        """Whether a device with ``value`` satisfies the bound."""
        return {
            ">=": value >= self.bound,
            ">": value > self.bound,
            "==": value == self.bound,
            "<=": value <= self.bound,
            "<": value < self.bound,
        }[self.op]

    def prefer_high(self) -> bool:
        """Whether larger values come nearer to satisfying the bound."""
        return self.op in (">=", ">", "==")


def capacity_bounds(expression: str) -> list[CapacityBound]:
    """Every capacity-versus-quantity comparison in a CEL selector, in order."""
    found: list[tuple[int, CapacityBound]] = []
    for m in _COMPARE_TO.finditer(expression):
        domain, name, text, op = m.groups()
        found.append((m.start(), _bound(domain, name, op, text)))
    for m in _IS_GREATER.finditer(expression):
        domain, name, fn, text = m.groups()
        found.append((m.start(), _bound(domain, name, ">" if fn == "isGreaterThan" else "<", text)))
    return [b for _, b in sorted(found, key=lambda t: t[0]) if b.bound is not None]


def _bound(domain: str, name: str, op: str, text: str) -> CapacityBound:
    try:
        bound: Amount = Quantity.coerce(text).amount()
    except QuantityError:  # not a quantity: no gap can be computed, but keep the order
        bound = 0
    return CapacityBound(domain=domain, name=name, op=op, bound=bound, text=text)


def capacity_of(dev: DeviceInfo, domain: str, name: str) -> Amount | None:
    """A device's capacity ``domain/name`` (unqualified names belong to the driver)."""
    for key in (f"{domain}/{name}", name if domain == dev.driver else None):
        if key and key in dev.capacity:
            return dev.capacity[key].value
    return None


@dataclass(frozen=True, slots=True)
class Gap:
    """The closest any node comes to a capacity bound."""

    bound: CapacityBound
    node: str
    value: Amount

    def __str__(self) -> str:
        """``memory >= 40Gi: best node n3 has 16Gi``."""
        return (
            f"{self.bound.name} {self.bound.op} {self.bound.text}: best node {self.node} "
            f"has {Quantity(self.value, QuantityFormat.BINARY_SI)}"
        )


def _missing(diag: NodeDiagnosis) -> int:
    if diag.shortfalls:
        return sum(max(s.need - s.usable, 0) for s in diag.shortfalls)
    # Errors, invalid pools, constraints: further than any count of missing devices.
    return 1 << 20


def closest_node(nodes: Sequence[NodeDiagnosis]) -> NodeDiagnosis | None:
    """The failing node missing the fewest devices (by name among equals)."""
    failing = [d for d in nodes if not d.allocatable]
    return min(failing, key=lambda d: (_missing(d), d.node)) if failing else None


def selector_gap(request: str, nodes: Sequence[NodeDiagnosis]) -> Gap | None:
    """The capacity bound that rejects the request's devices, and the node nearest to it."""
    shortfalls = [(d.node, s) for d in nodes for s in d.shortfalls if s.request == request]
    expressions: Counter[str] = Counter()
    for _, s in shortfalls:
        expressions.update(s.false_selectors)
    if not expressions:
        return None
    expression = expressions.most_common(1)[0][0]
    for bound in capacity_bounds(expression):
        best: tuple[Amount, str] | None = None
        for node, shortfall in shortfalls:
            for dev in shortfall.rejected:
                value = capacity_of(dev, bound.domain, bound.name)
                if value is None or bound.holds(value):
                    continue
                score = value if bound.prefer_high() else -value
                if best is None or score > best[0] or (score == best[0] and node < best[1]):
                    best = (score, node)
        if best is not None:
            value = best[0] if bound.prefer_high() else -best[0]
            return Gap(bound=bound, node=best[1], value=value)
    return None


def _shortfall_text(shortfall: RequestShortfall) -> str:
    return (
        f"request {shortfall.request} needs {shortfall.need} device(s) of class "
        f"{shortfall.class_name}, {shortfall.usable} usable"
    )


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
            text = f"{head}: request {shortfall.request}: {gap}"
        else:
            detail = next((r.strip() for r in closest.reasons if r.startswith("  ")), "")
            text = f"{head}; closest node {closest.node}: {_shortfall_text(shortfall)}"
            if detail:
                text += f": {detail}"
    else:
        detail = closest.error or next(iter(closest.reasons), "no usable devices")
        text = f"{head}; closest node {closest.node}: {detail.strip()}"
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."
