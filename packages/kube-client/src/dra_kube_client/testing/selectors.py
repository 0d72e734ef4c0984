"""Label and field selectors as the API server reads them (equality-based forms only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Requirement", "SelectorError", "matches", "parse_selector"]


class SelectorError(ValueError):
    """A selector this test double does not understand (the server answers 400)."""


@dataclass(frozen=True)
class Requirement:
    """One comma-separated term: ``key`` exists (``value`` None), or equals / differs."""

    key: str
    value: str | None = None
    negated: bool = False


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """``a``, ``!a``, ``a=v``, ``a==v``, ``a!=v``, joined by commas (set-based forms rejected).

    Raises:
        SelectorError: a term of another form (``a in (x)``, empty keys).
    """
    out: list[Requirement] = []
    for raw in text.split(","):
        term = raw.strip()
        if not term:
            continue
        if " " in term or "(" in term:
            raise SelectorError(f"unsupported selector term {term!r}")
        if "!=" in term:
            key, value = term.split("!=", 1)
            out.append(Requirement(key, value, negated=True))
        elif "=" in term:
            key, value = term.split("==", 1) if "==" in term else term.split("=", 1)
            out.append(Requirement(key, value))
        elif term.startswith("!"):
            out.append(Requirement(term[1:], None, negated=True))
        else:
            out.append(Requirement(term))
        if not out[-1].key:
            raise SelectorError(f"selector term {term!r} has no key")
    return tuple(out)


def _field(obj: Mapping[str, Any], dotted: str) -> str | None:
    value: Any = obj
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return None if isinstance(value, Mapping | list) else str(value)


def matches(
    obj: Mapping[str, Any],
    *,
    labels: tuple[Requirement, ...] = (),
    fields: tuple[Requirement, ...] = (),
) -> bool:
    """Whether ``obj`` satisfies every label and field requirement."""
    meta = obj.get("metadata") or {}
    own_labels: Mapping[str, str] = meta.get("labels") or {}
    for req in labels:
        present = req.key in own_labels
        if req.value is None:
            if present == req.negated:
                return False
        elif (own_labels.get(req.key) == req.value) == req.negated:
            return False
    for req in fields:
        # A field the object lacks compares as the empty string, as the server's field sets do.
        value = _field(obj, req.key) or ""
        if (value == (req.value or "")) == req.negated:
            return False
    return True
