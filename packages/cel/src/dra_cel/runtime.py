"""Evaluation frames and the runtime cost meter.

Compiled closures take one argument, the frame: ``[device, cost spent, slot...]``.
Slots hold comprehension and ``cel.bind`` variables, assigned at compile time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .errors import CelCostLimitError
from .syntax import Call, Const, Ident, Index, ListLit, MapLit, Node, Select

Frame = list[Any]
Fn = Callable[[Frame], Any]

#: Upstream's CELSelectorExpressionMaxCost.
COST_LIMIT: Final = 1_000_000


def charge(frame: Frame, amount: int) -> None:
    """Add runtime cost; raise :class:`CelCostLimitError` past the limit."""
    frame[1] += amount
    if frame[1] > COST_LIMIT:
        raise CelCostLimitError(
            f"operation cancelled: actual cost limit exceeded (limit {COST_LIMIT})"
        )


def node_count(node: Node) -> int:
    """Static cost of evaluating a subtree once (literals 10/30 as upstream's create costs)."""
    if isinstance(node, Const | Ident):
        return 1
    if isinstance(node, Select):
        return 1 + node_count(node.operand)
    if isinstance(node, Index):
        return 1 + node_count(node.operand) + node_count(node.index)
    if isinstance(node, Call):
        total = 1 + sum(node_count(a) for a in node.args)
        return total + (node_count(node.target) if node.target is not None else 0)
    if isinstance(node, ListLit):
        return 10 + sum(node_count(e) for e in node.elements)
    if isinstance(node, MapLit):
        pairs = zip(node.keys, node.values, strict=True)
        return 30 + sum(node_count(k) + node_count(v) for k, v in pairs)
    return 1
