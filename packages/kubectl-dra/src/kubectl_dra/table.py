"""kubectl's plain-text table: upper-case headers, columns padded to their widest cell and
three spaces apart (kubectl's tabwriter padding), ``<none>`` for an empty cell (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field

#: What kubectl prints for a cell that has no value.
NONE = "<none>"
#: Spaces between columns, as kubectl's printer pads them.
PADDING = 3


@dataclass(frozen=True, slots=True)
class Table:
    """Column names and rows of cells (one string per column)."""

    columns: tuple[str, ...]
    rows: list[tuple[str, ...]] = field(default_factory=list)

    def add(self, *cells: str) -> None:
        """Append a row.

        Raises:
            ValueError: the row has not one cell per column (a programming error).
        """
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(cells)

    def render(self) -> str:
        """The table as kubectl prints it; the last column is not padded."""
        lines = [self.columns, *((c or NONE for c in row) for row in self.rows)]
        cells = [tuple(" ".join(str(c).split()) for c in line) for line in lines]
        widths = [max(len(line[i]) for line in cells) for i in range(len(self.columns))]
        out = []
        for line in cells:
            padded = [c.ljust(w + PADDING) for c, w in zip(line[:-1], widths, strict=False)]
            out.append(("".join(padded) + line[-1]).rstrip())
        return "\n".join(out) + "\n"
