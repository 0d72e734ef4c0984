"""Parse CEL text into a small immutable AST.

cel-python's Lark grammar does the parsing. Its grammar predates CEL's optional syntax
(``x.?f``, ``m[?k]``, ``[?e]``, ``{?k: v}``), so :func:`parse` first blanks each such
``?`` (keeping every character offset) and remembers where the marked operand starts;
the tree walk turns those places back into optional selections.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import lark
import lark.exceptions

from .errors import CelCompileError
from .grammar_cache import cache_file, grammar_text

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


class UInt(int):
    """A CEL ``uint`` value: an ``int`` that remembers its CEL type."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


@dataclass(frozen=True, slots=True)
class Node:
    """Base of all AST nodes; ``start``/``end`` are character offsets into the source."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Const(Node):
    """A literal."""

    value: Any


@dataclass(frozen=True, slots=True)
class Ident(Node):
    """A variable reference."""

    name: str


@dataclass(frozen=True, slots=True)
class Select(Node):
    """``operand.field`` or, with ``optional``, ``operand.?field``."""

    operand: Node
    field: str
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Index(Node):
    """``operand[index]`` or, with ``optional``, ``operand[?index]``."""

    operand: Node
    index: Node
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A function, method or operator call (operators are named like ``_==_``)."""

    function: str
    target: Node | None
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class ListLit(Node):
    """``[a, ?b]``; ``optional[i]`` marks ``?`` elements."""

    elements: tuple[Node, ...]
    optional: tuple[bool, ...]


@dataclass(frozen=True, slots=True)
class MapLit(Node):
    """``{k: v, ?k2: v2}``."""

    keys: tuple[Node, ...]
    values: tuple[Node, ...]
    optional: tuple[bool, ...]


_RELATIONS = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
}
_ADDITIONS = {"addition_add": "_+_", "addition_sub": "_-_"}
_MULTIPLICATIONS = {
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}


def _blank_optional_markers(text: str) -> tuple[str, frozenset[int]]:
    """Replace optional-syntax ``?`` by a blank; return the new text and marked offsets.

    A ``?`` right after ``.``, ``[``, ``{`` or ``,`` (ignoring blanks) can only be the
    optional marker: the conditional operator never follows those tokens.
    """
    if "?" not in text:
        return text, frozenset()
    chars = list(text)
    marked: set[int] = set()
    i = 0
    n = len(text)
    last = ""
    while i < n:
        c = text[i]
        if c in "\"'" or (c in "rRbB" and i + 1 < n and text[i + 1] in "\"'"):
            i = _skip_string(text, i)
            last = "'"
            continue
        if c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c.isspace():
            i += 1
            continue
        if c == "?" and last in (".", "[", "{", ","):
            chars[i] = " "
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            marked.add(j)
        last = c
        i += 1
    return "".join(chars), frozenset(marked)


def _skip_string(text: str, i: int) -> int:
    while text[i] not in "\"'":
        i += 1  # prefixes r/b
    raw = text[i - 1] in "rR" if i > 0 else False
    quote = text[i]
    triple = text.startswith(quote * 3, i)
    delim = quote * 3 if triple else quote
    j = i + len(delim)
    n = len(text)
    while j < n:
        if not raw and text[j] == "\\":
            j += 2
            continue
        if text.startswith(delim, j):
            return j + len(delim)
        if not triple and text[j] == "\n":
            return j
        j += 1
    return n


_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    '"': '"',
    "'": "'",
    "\\": "\\",
    "`": "`",
    "?": "?",
}


def _decode_string(token: str, *, as_bytes: bool) -> str | bytes:
    raw = False
    while token[0] in "rRbB":
        raw = raw or token[0] in "rR"
        token = token[1:]
    quote_len = 3 if token[:3] in ('"""', "'''") else 1
    body = token[quote_len:-quote_len]
    if raw:
        return body.encode() if as_bytes else body
    out = bytearray()
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        e = body[i + 1] if i + 1 < n else ""
        if e in _ESCAPES:
            out += _ESCAPES[e].encode()
            i += 2
        elif e in "xX":
            code = int(body[i + 2 : i + 4], 16)
            out += bytes([code]) if as_bytes else chr(code).encode()
            i += 4
        elif e == "u" or e == "U":
            width = 4 if e == "u" else 8
            code = int(body[i + 2 : i + 2 + width], 16)
            if as_bytes or 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
                raise ValueError(f"invalid unicode escape \\{e}{body[i + 2 : i + 2 + width]}")
            out += chr(code).encode()
            i += 2 + width
        elif e.isdigit():
            code = int(body[i + 1 : i + 4], 8)
            out += bytes([code]) if as_bytes else chr(code).encode()
            i += 4
        else:
            raise ValueError(f"invalid escape sequence \\{e}")
    if as_bytes:
        return bytes(out)
    return out.decode("utf-8", errors="surrogatepass")


class _Builder:
    def __init__(self, text: str, marked: frozenset[int]) -> None:
        self.text = text
        self.marked = marked

    def error(self, message: str, position: int) -> CelCompileError:
        return CelCompileError(message, expression=self.text, position=position)

    @staticmethod
    def span(tree: lark.Tree[Any] | lark.Token) -> tuple[int, int]:
        if isinstance(tree, lark.Token):
            start = tree.start_pos or 0
            return start, tree.end_pos or start
        meta = tree.meta
        if meta.empty:
            return 0, 0
        return meta.start_pos, meta.end_pos

    def build(self, tree: Any) -> Node:
        method = getattr(self, "_" + tree.data)
        result: Node = method(tree)
        return result

    def _expr(self, tree: lark.Tree[Any]) -> Node:
        kids = tree.children
        if len(kids) == 1:
            return self.build(kids[0])
        s, e = self.span(tree)
        return Call(s, e, "_?_:_", None, tuple(self.build(k) for k in kids))

    def _conditionalor(self, tree: lark.Tree[Any]) -> Node:
        return self._logical_chain(tree, "_||_")

    def _conditionaland(self, tree: lark.Tree[Any]) -> Node:
        return self._logical_chain(tree, "_&&_")

    def _logical_chain(self, tree: lark.Tree[Any], op: str) -> Node:
        """``a && b && c ...``: walk the left spine without recursion, then balance.

        Like upstream's parser, long chains become a balanced tree, so a selector
        listing hundreds of alternatives neither recurses deeply nor evaluates slowly.
        """
        operands: list[Any] = []
        current: Any = tree
        while len(current.children) == 2:
            operands.append(current.children[1])
            current = current.children[0]
        operands.append(current.children[0])
        operands.reverse()
        return self._balance([self.build(o) for o in operands], op)

    def _balance(self, nodes: list[Node], op: str) -> Node:
        if len(nodes) == 1:
            return nodes[0]
        middle = len(nodes) // 2
        left = self._balance(nodes[:middle], op)
        right = self._balance(nodes[middle:], op)
        return Call(left.start, right.end, op, None, (left, right))

    def _operator_chain(self, tree: lark.Tree[Any], table: dict[str, str]) -> Node:
        kids = tree.children
        if len(kids) == 1:
            return self.build(kids[0])
        op_tree, right = kids
        s, e = self.span(tree)
        left = self.build(op_tree.children[0])
        return Call(s, e, table[op_tree.data], None, (left, self.build(right)))

    def _relation(self, tree: lark.Tree[Any]) -> Node:
        return self._operator_chain(tree, _RELATIONS)

    def _addition(self, tree: lark.Tree[Any]) -> Node:
        return self._operator_chain(tree, _ADDITIONS)

    def _multiplication(self, tree: lark.Tree[Any]) -> Node:
        return self._operator_chain(tree, _MULTIPLICATIONS)

    def _unary(self, tree: lark.Tree[Any]) -> Node:
        kids = tree.children
        if len(kids) == 1:
            return self.build(kids[0])
        s, e = self.span(tree)
        op = "!_" if kids[0].data == "unary_not" else "-_"
        # cel-go's parser keeps one operator of a run written back to back (``!!x`` is
        # ``x``, ``!!!x`` is ``!x``); parentheses end the run.
        run, inner = 1, kids[1]
        while (
            isinstance(inner, lark.Tree)
            and inner.data == "unary"
            and len(inner.children) == 2
            and inner.children[0].data == kids[0].data
        ):
            run, inner = run + 1, inner.children[1]
        operand = self.build(inner)
        if run % 2 == 0:
            return operand
        return Call(s, e, op, None, (operand,))

    def _member(self, tree: lark.Tree[Any]) -> Node:
        return self.build(tree.children[0])

    def _primary(self, tree: lark.Tree[Any]) -> Node:
        return self.build(tree.children[0])

    def _member_dot(self, tree: lark.Tree[Any]) -> Node:
        operand, ident = tree.children
        assert isinstance(ident, lark.Token)
        s, e = self.span(tree)
        optional = ident.start_pos in self.marked
        return Select(s, e, self.build(operand), str(ident), optional)

    def _exprlist(self, tree: lark.Tree[Any] | None) -> tuple[Node, ...]:
        if tree is None:
            return ()
        return tuple(self.build(k) for k in tree.children)

    def _member_dot_arg(self, tree: lark.Tree[Any]) -> Node:
        kids = tree.children
        operand, ident = kids[0], kids[1]
        assert isinstance(ident, lark.Token)
        s, e = self.span(tree)
        if ident.start_pos in self.marked:
            raise self.error("optional selection cannot be a call", ident.start_pos or 0)
        args = self._exprlist(kids[2] if len(kids) > 2 else None)
        return Call(s, e, str(ident), self.build(operand), args)

    def _member_index(self, tree: lark.Tree[Any]) -> Node:
        operand, index = tree.children
        s, e = self.span(tree)
        optional = self.span(index)[0] in self.marked
        return Index(s, e, self.build(operand), self.build(index), optional)

    def _member_object(self, tree: lark.Tree[Any]) -> Node:
        s, _ = self.span(tree)
        raise self.error("message construction is not supported in this environment", s)

    def _dot_ident_arg(self, tree: lark.Tree[Any]) -> Node:
        return self._ident_arg(tree)

    def _ident_arg(self, tree: lark.Tree[Any]) -> Node:
        kids = tree.children
        s, e = self.span(tree)
        args = self._exprlist(kids[1] if len(kids) > 1 else None)
        return Call(s, e, str(kids[0]), None, args)

    def _dot_ident(self, tree: lark.Tree[Any]) -> Node:
        return self._ident(tree)

    def _ident(self, tree: lark.Tree[Any]) -> Node:
        s, e = self.span(tree)
        return Ident(s, e, str(tree.children[0]))

    def _paren_expr(self, tree: lark.Tree[Any]) -> Node:
        return self.build(tree.children[0])

    def _list_lit(self, tree: lark.Tree[Any]) -> Node:
        s, e = self.span(tree)
        elements_tree = tree.children[0] if tree.children else None
        elements = self._exprlist(elements_tree)
        optional: tuple[bool, ...] = ()
        if elements_tree is not None:
            optional = tuple(self.span(k)[0] in self.marked for k in elements_tree.children)
        return ListLit(s, e, elements, optional)

    def _map_lit(self, tree: lark.Tree[Any]) -> Node:
        s, e = self.span(tree)
        if not tree.children:
            return MapLit(s, e, (), (), ())
        kids = tree.children[0].children
        keys = tuple(self.build(k) for k in kids[0::2])
        values = tuple(self.build(v) for v in kids[1::2])
        optional = tuple(self.span(k)[0] in self.marked for k in kids[0::2])
        return MapLit(s, e, keys, values, optional)

    def _literal(self, tree: lark.Tree[Any]) -> Node:
        token = tree.children[0]
        assert isinstance(token, lark.Token)
        s, e = self.span(token)
        kind = token.type
        text = str(token)
        value: Any
        try:
            if kind == "INT_LIT":
                value = _parse_int(text)
                if not INT64_MIN <= value <= INT64_MAX:
                    raise ValueError(f"int literal out of range: {text}")
            elif kind == "UINT_LIT":
                value = _parse_int(text[:-1])
                if not 0 <= value <= UINT64_MAX:
                    raise ValueError(f"uint literal out of range: {text}")
                value = UInt(value)
            elif kind == "FLOAT_LIT":
                value = float(text)
            elif kind in ("STRING_LIT", "MLSTRING_LIT"):
                value = _decode_string(text, as_bytes=False)
            elif kind == "BYTES_LIT":
                value = _decode_string(text, as_bytes=True)
            elif kind == "BOOL_LIT":
                value = text == "true"
            elif kind == "NULL_LIT":
                value = None
            else:  # pragma: no cover - the grammar has no other literal
                raise ValueError(f"unknown literal {text}")
        except ValueError as err:
            raise self.error(str(err), s) from err
        return Const(s, e, value)


def _parse_int(text: str) -> int:
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    value = int(digits[2:], 16) if digits[:2].lower() == "0x" else int(digits, 10)
    return -value if negative else value


_PARSER: lark.Lark | None = None


def _boolean_literals(token: lark.Token) -> lark.Token:
    # The grammar's IDENT also matches true/false; re-type them as literals.
    if token.value in ("true", "false"):
        return lark.Token.new_borrow_pos("BOOL_LIT", token.value, token)
    return token


def _lark() -> lark.Lark:
    """Our own LALR parser over cel-python's grammar file.

    cel-python keeps one process-wide parser whose tree class depends on which of its
    runners was created first; building a separate instance keeps the two independent.
    The built tables are kept between processes where :func:`cache_file` names a place.
    """
    global _PARSER
    if _PARSER is None:
        cache = cache_file()
        _PARSER = lark.Lark(
            grammar_text(),
            cache=cache if cache is not None else False,
            parser="lalr",
            start="expr",
            g_regex_flags=re.M,
            lexer_callbacks={"IDENT": _boolean_literals},
            propagate_positions=True,
            maybe_placeholders=False,
            priority="invert",
        )
    return _PARSER


def _describe(err: lark.exceptions.UnexpectedInput, text: str) -> str:
    if isinstance(err, lark.exceptions.UnexpectedEOF) or (
        isinstance(err, lark.exceptions.UnexpectedToken) and err.token.type == "$END"
    ):
        return "unexpected end of expression"
    if isinstance(err, lark.exceptions.UnexpectedToken):
        return f"unexpected {str(err.token)!r}"
    if isinstance(err, lark.exceptions.UnexpectedCharacters):
        return f"unexpected character {text[err.pos_in_stream or 0]!r}"
    return "invalid syntax"  # pragma: no cover


def parse(text: str) -> Node:
    """Parse CEL source into an AST; raises :class:`CelCompileError` with a position."""
    prepared, marked = _blank_optional_markers(text)
    try:
        tree = _lark().parse(prepared)
    except lark.exceptions.UnexpectedInput as err:
        position: int = err.pos_in_stream or 0
        if isinstance(err, lark.exceptions.UnexpectedEOF):
            position = len(text)
        if isinstance(err, lark.exceptions.UnexpectedToken) and err.token.type == "$END":
            position = len(text)
        raise CelCompileError(
            f"Syntax error: {_describe(err, text)}", expression=text, position=position
        ) from None
    except lark.exceptions.LarkError as err:
        raise CelCompileError(f"Syntax error: {err}", expression=text) from None
    return _Builder(text, marked).build(tree)
