"""Reading manifests from files, directories and stdin (the I/O edge of the offline tools)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_api_types.yaml_source import Positions, load_positioned

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class InputError(Exception):
    """A path cannot be read or holds something that is not a manifest."""


@dataclass(frozen=True, slots=True)
class Document:
    """One raw document and where it came from."""

    source: str
    index: int
    data: Any
    #: Where the document's fields are in the file (None for documents built in memory).
    positions: Positions | None = None

    @property
    def where(self) -> str:
        """``file[#index]`` for messages."""
        return f"{self.source}#{self.index}"

    def location(self, path: str = "") -> str:
        """``FILE:LINE`` of the field at ``path`` (or of its deepest present part), as
        compilers print it; ``file#index`` when the positions are unknown."""
        if self.positions is None:
            return self.where
        return f"{self.source}:{self.positions.line_of(path)}"


@dataclass(frozen=True, slots=True)
class BrokenFile:
    """A file (or stdin, ``-``) that could not be read to the end, and why."""

    source: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.message}"


def object_label(data: Any) -> str:
    """``Kind namespace/name`` of a raw object, for messages (``?`` for what is missing)."""
    if not isinstance(data, Mapping):
        return "document"
    meta = data.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = meta.get("name") or meta.get("generateName") or "?"
    ns = meta.get("namespace")
    return f"{data.get('kind', '?')} {ns + '/' if ns else ''}{name}"


def manifest_files(paths: Iterable[str]) -> list[str]:
    """Expand directories (recursively, sorted) into their YAML/JSON files; ``-`` is stdin."""
    out: list[str] = []
    for raw in paths:
        if raw == "-":
            out.append(raw)
            continue
        path = Path(raw)
        if path.is_dir():
            out.extend(
                str(p)
                for p in sorted(path.rglob("*"))
                if p.is_file() and p.suffix in MANIFEST_SUFFIXES
            )
        elif path.is_file():
            out.append(str(path))
        else:
            raise InputError(f"{raw}: no such file or directory")
    return out


def read_sources(paths: Sequence[str]) -> tuple[list[Document], list[BrokenFile]]:
    """Every document of every file (``kind: List`` expanded, with positions), and the
    files that are not (entirely) YAML or JSON; the documents before a syntax error count.

    Raises :class:`InputError` for a path that does not exist.
    """
    docs: list[Document] = []
    broken: list[BrokenFile] = []
    for source in manifest_files(paths):
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else None
            broken.append(BrokenFile(source, 1, f"cannot be read: {reason or exc}"))
            continue
        loaded, problem = load_positioned(text)
        if problem is not None:
            broken.append(BrokenFile(source, problem.line, problem.message))
        index = 0
        for doc in loaded:
            data, positions = doc.data, doc.positions
            if (
                isinstance(data, dict)
                and data.get("kind") == "List"
                and isinstance(data.get("items"), list)
            ):
                listed = positions.child("items")
                items = [(item, listed.child(i)) for i, item in enumerate(data["items"])]
            else:
                items = [(data, positions)]
            for item, where in items:
                docs.append(Document(source=source, index=index, data=item, positions=where))
                index += 1
    return docs, broken


def read_documents(paths: Sequence[str]) -> list[Document]:
    """Every document of every file (``kind: List`` expanded), in file order.

    Raises :class:`InputError` naming the file and line of the first file that is not YAML
    or JSON, or cannot be read.
    """
    docs, broken = read_sources(paths)
    if broken:
        raise InputError(str(broken[0]))
    return docs
