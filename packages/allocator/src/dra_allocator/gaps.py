"""The plain-words gap of a claim no node can take: what was asked, the best candidate, the gap.

From the allocator's diagnosis of a pending claim. A selector comparing a capacity with a
quantity (``device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0``) is
reported as the gap to the device that comes nearest: ``memory >= 40Gi: best device
n3/gpu-0 has 16Gi`` (``kubectl dra explain``) or ``best node n3 has 16Gi`` (the allocation
controller's ``DRAUnsatisfiable`` Event). Other shortfalls name the node with the most
usable devices and the first reason there. One implementation for both, so the Event and
``explain`` always say the same.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from dra_api_types import Amount, Quantity, QuantityError

from .capacity import format_amount
from .explain import ClaimDiagnosis, NodeDiagnosis, RequestShortfall
from .model import DeviceInfo

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

    def __str__(self) -> str:
        """``memory >= 40Gi``."""
        return f"{self.name} {self.op} {self.text}"


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
    """The closest any device comes to a capacity bound, and where it is."""

    bound: CapacityBound
    node: str
    device: DeviceInfo
    value: Amount

    def node_text(self) -> str:
        """``memory >= 40Gi: best node n3 has 16Gi``."""
        return f"{self.bound}: best node {self.node} has {format_amount(self.value)}"

    def device_text(self) -> str:
        """``memory >= 40Gi: best device n3/gpu-0 has 16Gi`` (the device as pool/name)."""
        return (
            f"{self.bound}: best device {self.device.pool}/{self.device.name} "
            f"has {format_amount(self.value)}"
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
    """The capacity bound that rejects the request's devices, and the device nearest to it."""
    shortfalls = [(d.node, s) for d in nodes for s in d.shortfalls if s.request == request]
    expressions: Counter[str] = Counter()
    for _, s in shortfalls:
        expressions.update(s.false_selectors)
    if not expressions:
        return None
    expression = expressions.most_common(1)[0][0]
    for bound in capacity_bounds(expression):
        best: tuple[Amount, str, DeviceInfo] | None = None
        for node, shortfall in shortfalls:
            for dev in shortfall.rejected:
                value = capacity_of(dev, bound.domain, bound.name)
                if value is None or bound.holds(value):
                    continue
                score = value if bound.prefer_high() else -value
                if best is None or score > best[0] or (score == best[0] and node < best[1]):
                    best = (score, node, dev)
        if best is not None:
            value = best[0] if bound.prefer_high() else -best[0]
            return Gap(bound=bound, node=best[1], device=best[2], value=value)
    return None


def shortfall_text(shortfall: RequestShortfall) -> str:
    """``request gpu needs 2 device(s) of class gpu.nvidia.com, 1 usable``."""
    return (
        f"request {shortfall.request} needs {shortfall.need} device(s) of class "
        f"{shortfall.class_name}, {shortfall.usable} usable"
    )


def request_summaries(diag: ClaimDiagnosis) -> list[str]:
    """One plain line per request short of devices on every node; [] if some node fits.

    ``request gpu: memory >= 400Gi: best device n1/gpu-0 has 81559Mi`` where a capacity
    bound rejects the devices; otherwise ``request gpu: needs 1 device(s) of class C; best
    node n1 has 0 usable: <first reason there>``. A claim short of nothing (constraints,
    errors) gets one line naming the closest node and what fails there.
    """
    if not diag.nodes or any(d.allocatable for d in diag.nodes):
        return []
    requests = list(dict.fromkeys(s.request for d in diag.nodes for s in d.shortfalls))
    lines: list[str] = []
    for request in requests:
        gap = selector_gap(request, diag.nodes)
        if gap is not None:
            lines.append(f"request {request}: {gap.device_text()}")
            continue
        node, best = min(
            ((d.node, s) for d in diag.nodes for s in d.shortfalls if s.request == request),
            key=lambda t: (-t[1].usable, t[0]),
        )
        line = (
            f"request {request}: needs {best.need} device(s) of class {best.class_name}; "
            f"best node {node} has {best.usable} usable"
        )
        lines.append(f"{line}: {best.details[0]}" if best.details else line)
    if not lines:
        closest = closest_node(diag.nodes)
        if closest is not None:
            detail = closest.error or next(iter(closest.reasons), "no usable devices")
            lines.append(f"closest node {closest.node}: {detail.strip()}")
    return lines
