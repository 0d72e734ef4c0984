"""A claim's diagnosis as reason lines (``kubectl dra allocate``'s ``reasons``).

Nodes with identical findings are grouped into one line, naming at most ``MAX_NODES_NAMED``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .explain import ClaimDiagnosis

MAX_NODES_NAMED = 5


def reasons_of(diag: ClaimDiagnosis) -> list[str]:
    """Flatten a diagnosis into reason lines, nodes with identical findings grouped."""
    lines: list[str] = []
    for names, node_diag in diag.grouped():
        if node_diag.allocatable:
            continue
        prefix = _node_list(names)
        if node_diag.error:
            lines.append(f"{prefix}: error: {node_diag.error}")
        for reason in node_diag.reasons:
            lines.append(f"{prefix}: {reason.strip()}")
        if not node_diag.error and not node_diag.reasons:
            lines.append(f"{prefix}: no solution together with the pod's other claims")
    return lines


def _node_list(names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"node {names[0]}"
    shown = ", ".join(names[:MAX_NODES_NAMED])
    more = f" and {len(names) - MAX_NODES_NAMED} more" if len(names) > MAX_NODES_NAMED else ""
    return f"nodes {shown}{more}"
