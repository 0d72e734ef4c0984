"""RE2 regular expressions for ``matches``, ``find`` and ``findAll``, evaluated fast.

Upstream evaluates regexes with RE2 syntax and semantics. The ``google-re2`` binding is
the reference here, but each call costs microseconds, so a pattern whose meaning is
provably identical under Python's ``re`` (a conservative ASCII subset, with RE2's
``\\s`` and ``$`` spelled out) is also compiled for ``re`` and used whenever the
subject is ASCII; everything else goes through RE2.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Final

import re2  # type: ignore[import-untyped]

from .errors import CelRuntimeError

_RE2_SPACE: Final = r"\t\n\f\r "
# Escapes with the same meaning in RE2 and in Python's re (ASCII mode).
_SAME_ESCAPES: Final = frozenset("dDwWbBAntfr.\\-^$*+?()[]{}|/")
_LEADING_FLAGS: Final = re.compile(r"\(\?([ims]+)\)")


class Regex:
    """A compiled pattern: RE2 always, plus an equivalent Python pattern when one exists."""

    __slots__ = ("fast", "pattern", "slow")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        try:
            self.slow: Any = re2.compile(pattern)
        except Exception as err:  # re2 raises its own error type
            raise CelRuntimeError(f"invalid regular expression {pattern!r}: {err}") from None
        translated = _to_python(pattern)
        self.fast: re.Pattern[str] | None = None
        if translated is not None:
            try:
                self.fast = re.compile(translated, re.ASCII)
            except re.error:
                self.fast = None

    def search(self, subject: str) -> bool:
        """Whether the pattern matches anywhere in ``subject`` (CEL ``matches``)."""
        fast = self.fast
        if fast is not None and subject.isascii():
            return fast.search(subject) is not None
        return self.slow.search(subject) is not None

    def find(self, subject: str) -> str:
        """The first match or ``""``."""
        m = self.slow.search(subject)
        return str(m.group(0)) if m else ""

    def find_all(self, subject: str) -> list[str]:
        """All non-overlapping matches."""
        return [str(m.group(0)) for m in self.slow.finditer(subject)]


def _to_python(pattern: str) -> str | None:
    """Spell an RE2 pattern for Python's re, or None if the subset check fails."""
    if not pattern.isascii():
        return None
    multiline = False
    body = pattern
    flags = _LEADING_FLAGS.match(pattern)
    if flags:
        multiline = "m" in flags.group(1)
        body = pattern[flags.end() :]
    if "(?" in body.replace("(?:", "").replace("(?P<", ""):
        return None  # inline flags elsewhere, lookaround (rejected by RE2 anyway), ...
    out: list[str] = [pattern[: len(pattern) - len(body)]]
    i = 0
    in_class = False
    n = len(body)
    while i < n:
        c = body[i]
        if c == "\\":
            if i + 1 >= n:
                return None
            e = body[i + 1]
            if e == "s":
                out.append(_RE2_SPACE if in_class else f"[{_RE2_SPACE}]")
            elif e == "S" and not in_class:
                out.append(f"[^{_RE2_SPACE}]")
            elif e in _SAME_ESCAPES or (not e.isalnum() and e != "_"):
                out.append(c + e)
            else:
                return None  # \p, \Q, \z, \x, \v, octal, ...: let RE2 decide
            i += 2
            continue
        if in_class:
            if c == "[" or (c in "-&~|" and body.startswith(c * 2, i)):
                return None  # POSIX classes and Python's future set syntax
            if c == "]":
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            # A leading ] (or ^]) is a literal in both engines.
            j = i + 1
            if body.startswith("^", j):
                out.append("^")
                j += 1
            if body.startswith("]", j):
                out.append("\\]")
                j += 1
            i = j
            continue
        if c == "{" and body.startswith("{,", i):
            return None  # Python reads {,n} as a repeat, RE2 as a literal
        if c == "$" and not multiline:
            out.append(r"\Z")
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


@lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Regex:
    """Compile (cached); an invalid pattern is a runtime error, as upstream."""
    return Regex(pattern)
