"""Reading manifests from files, directories and stdin (the I/O edge of the offline tools)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dra_api_types.codec import load_documents

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class InputError(Exception):
    """A path cannot be read or holds something that is not a manifest."""


@dataclass(frozen=True, slots=True)
class Document:
    """One raw document and where it came from."""

    source: str
    index: int
    data: Any

    @property
    def where(self) -> str:
        """``file[#index]`` for messages."""
        return f"{self.source}#{self.index}"


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


def read_documents(paths: Sequence[str]) -> list[Document]:
    """Every document of every file (``kind: List`` expanded), in file order."""
    docs: list[Document] = []
    for source in manifest_files(paths):
        try:
            text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(f"{source}: {exc.strerror or exc}") from exc
        try:
            loaded = load_documents(text)
        except ValueError as exc:
            raise InputError(f"{source}: {exc}") from exc
        index = 0
        for doc in loaded:
            items = (
                doc["items"]
                if isinstance(doc, dict)
                and doc.get("kind") == "List"
                and isinstance(doc.get("items"), list)
                else [doc]
            )
            for item in items:
                docs.append(Document(source=source, index=index, data=item))
                index += 1
    return docs
