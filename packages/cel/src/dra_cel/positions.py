"""Where cel-go locates an expression in its errors.

cel-go gives every expression the position of the token that makes it: an operator for
``a == b`` and ``!a``, the ``?`` of a conditional, the ``(`` of a call, the ``.`` of a field
selection, the ``[`` of an index, the first character of a literal or identifier. The AST
keeps each node's span; this recovers that token from the source text, so that a compile
error says ``1:6`` where the API server does.
"""

from __future__ import annotations

from .syntax import Call, Index, Node, Select

_SKIPPED = " \t\r\n)"


def _after(text: str, offset: int) -> int:
    """The first offset at or after ``offset`` that is not blank, a ``)`` or a comment."""
    i = offset
    while i < len(text):
        if text[i] in _SKIPPED:
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        else:
            return i
    return offset


def _find(text: str, token: str, offset: int, fallback: int) -> int:
    found = text.find(token, offset)
    return fallback if found < 0 else found


def position(text: str, node: Node) -> int:
    """The 0-based offset cel-go reports for ``node`` of ``text``."""
    if isinstance(node, Select):
        return _find(text, ".", node.operand.end, node.start)
    if isinstance(node, Index):
        return _find(text, "[", node.operand.end, node.start)
    if isinstance(node, Call):
        if node.target is not None:
            return _find(text, "(", node.target.end, node.start)
        name = node.function
        if name in ("!_", "-_"):
            return node.start
        if name.startswith("_") or name == "@in":
            # A binary operator or the conditional: the token after the first operand.
            return _after(text, node.args[0].end)
        return _find(text, "(", node.start, node.start)
    return node.start


__all__ = ["position"]
