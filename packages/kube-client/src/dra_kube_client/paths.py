"""Building API paths from object names."""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["path_segment"]


def path_segment(value: str) -> str:
    """Quote one path segment (names are DNS subdomains, but a name never splits a path)."""
    return quote(value, safe="")
