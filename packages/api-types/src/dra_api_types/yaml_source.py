"""Manifests read with their positions: the line of every field, and the fields given twice.

A finding about ``spec.devices.requests[0].exactly.count`` is most useful with the line the
user has to edit. :func:`load_positioned` keeps, beside each decoded document, the YAML node
it was built from, so :meth:`Positions.line_of` finds the line of any field path (or of its
deepest part that is present), and reports the keys a mapping repeats, which a YAML loader
otherwise resolves silently (the last one wins) and the API server's strict decoding
refuses. A file that is not valid YAML gives :class:`SyntaxProblem` with its line, after
the documents that precede the error.

Pure logic over text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import yaml

from .codec import _yaml_loader

__all__ = ["Positioned", "Positions", "SyntaxProblem", "load_positioned"]

_SEGMENT: Final = re.compile(r'\.?([^.\[\]"]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')


def path_segments(path: str) -> list[str | int]:
    """``spec.devices[3].attributes["gpu.nvidia.com/uuid"]`` as its keys and indexes."""
    segments: list[str | int] = []
    for match in _SEGMENT.finditer(path):
        name, index, key = match.groups()
        if index is not None:
            segments.append(int(index))
        else:
            segments.append(name if name is not None else json.loads(f'"{key}"'))
    return segments


@dataclass(frozen=True, slots=True)
class Positions:
    """Where the parts of one document are; ``node`` is None for text read as plain JSON."""

    node: yaml.Node | None
    #: Line of the document (1-based) when there is no node.
    first_line: int = 1
    #: The node of the key this value is under (a field's line is its key's).
    key: yaml.Node | None = None

    @property
    def line(self) -> int:
        """The first line (1-based) of this part: its key's for a field."""
        for node in (self.key, self.node):
            if node is not None:
                return int(node.start_mark.line) + 1
        return self.first_line

    def child(self, key: str | int) -> Positions:
        """The positions of a field or list item (this document's when it is absent)."""
        found = _child(self.node, key) if self.node is not None else None
        if found is None:
            return self
        return Positions(found[1], self.line, found[0])

    def line_of(self, path: str) -> int:
        """The line of the field at ``path``, or of its deepest part that is present."""
        current = self
        for segment in path_segments(path):
            nxt = current.child(segment)
            if nxt is current:
                break
            current = nxt
        return current.line

    def duplicates(self) -> list[tuple[str, int]]:
        """(field path, line) of every key that a mapping repeats, in document order."""
        return list(_duplicates(self.node, "")) if self.node is not None else []


@dataclass(frozen=True, slots=True)
class Positioned:
    """One decoded document and its positions."""

    data: Any
    positions: Positions


@dataclass(frozen=True, slots=True)
class SyntaxProblem:
    """Why a text is not YAML (or JSON), and the line (1-based) where the reader gave up."""

    line: int
    message: str


def load_positioned(text: str) -> tuple[list[Positioned], SyntaxProblem | None]:
    """The documents of a multi-document YAML or JSON text (empty ones dropped), each with
    its positions, and the syntax problem that ended the reading, if any."""
    if text.lstrip().startswith(("{", "[")):
        as_json = _load_json(text)
        if as_json is not None:
            return as_json, None
    docs: list[Positioned] = []
    loader = _yaml_loader()(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            data = loader.construct_document(node)
            if data is not None:
                docs.append(Positioned(data, Positions(node)))
    except yaml.MarkedYAMLError as exc:
        return _json_or(text, docs, exc)
    except yaml.YAMLError as exc:
        return docs, SyntaxProblem(1, f"not valid YAML: {exc}")
    finally:
        loader.dispose()
    return docs, None


def _load_json(text: str) -> list[Positioned] | None:
    """JSON decoded as JSON (YAML reads ``1e3`` as a string), positioned where YAML can."""
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError:
        return None
    try:
        node: yaml.Node | None = yaml.compose(text, Loader=_yaml_loader())
    except yaml.YAMLError:
        node = None
    if not isinstance(loaded, list):
        return [Positioned(loaded, Positions(node))]
    items = node.value if isinstance(node, yaml.SequenceNode) else []
    return [
        Positioned(item, Positions(items[i] if i < len(items) else None))
        for i, item in enumerate(loaded)
    ]


def _json_or(
    text: str, docs: list[Positioned], exc: yaml.MarkedYAMLError
) -> tuple[list[Positioned], SyntaxProblem | None]:
    # JSON that YAML refuses (a tab, for one) is still a manifest, only without positions.
    if text.lstrip().startswith(("{", "[")):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as err:
            return [], SyntaxProblem(err.lineno, f"not valid JSON: {err.msg} (column {err.colno})")
        items = loaded if isinstance(loaded, list) else [loaded]
        return [Positioned(item, Positions(None)) for item in items], None
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else 1
    what = exc.problem or exc.context or "syntax error"
    column = f" (column {mark.column + 1})" if mark is not None else ""
    return docs, SyntaxProblem(line, f"not valid YAML: {what}{column}")


def _child(node: yaml.Node, key: str | int) -> tuple[yaml.Node | None, yaml.Node] | None:
    """(key node, value node) of a field, (None, item node) of a list item."""
    if isinstance(node, yaml.MappingNode) and isinstance(key, str):
        found = None
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                found = (key_node, value_node)  # the last one wins, as in the decoded data
        return found
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return None, node.value[key]
    return None


def _duplicates(node: yaml.Node, path: str) -> Iterator[tuple[str, int]]:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            where = f"{path}.{key_node.value}" if path else str(key_node.value)
            if key_node.value in seen:
                yield where, key_node.start_mark.line + 1
            seen.add(key_node.value)
            yield from _duplicates(value_node, where)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicates(item, f"{path}[{i}]")
