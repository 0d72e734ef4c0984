"""The closest known name to a misspelt one, for "did you mean" hints.

One rule for every hint of the project (unknown fields, attribute names, class names), so
that a typo gets the same suggestion wherever it is found::

    from dra_api_types.spelling import closest_name

    assert closest_name("selector", ["selectors", "config"]) == "selectors"
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["closest_name", "did_you_mean"]

#: difflib's similarity ratio a name must reach to be suggested.
CUTOFF = 0.6


def closest_name(name: str, known: Iterable[str]) -> str | None:
    """The known name most like ``name`` (similar enough, or equal ignoring case), or None."""
    names = sorted(set(known))
    lowered = {n.lower(): n for n in names}
    if name.lower() in lowered:
        return lowered[name.lower()]
    import difflib  # deferred import: only a misspelt name needs it, and most runs have none

    close = difflib.get_close_matches(name, names, n=1, cutoff=CUTOFF)
    return close[0] if close else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean "x"?)`` for the closest known name, or an empty string."""
    close = closest_name(name, known)
    return f' (did you mean "{close}"?)' if close is not None else ""
