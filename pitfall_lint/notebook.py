"""Jupyter notebooks: the code cells joined into one module, and every line traced back to its cell."""

from __future__ import annotations

import json
from dataclasses import dataclass

NOTEBOOK_SUFFIX = ".ipynb"


class NotebookError(Exception):
    """Why a notebook cannot be read as one (malformed JSON, no cells, ...)."""


@dataclass(frozen=True)
class NotebookSource:
    text: str
    # For each line of `text` (0-based): the 1-based cell number and the 1-based line in that cell.
    origins: tuple[tuple[int, int], ...]

    def origin(self, line: int) -> tuple[int, int]:
        return self.origins[min(max(line, 1), len(self.origins)) - 1] if self.origins else (1, line)


def _is_magic(line: str) -> bool:
    """IPython's `%magic`, `!shell` and `?help` lines are not Python: they become comments."""
    stripped = line.lstrip()
    return stripped.startswith(("%", "!", "?")) or stripped.endswith("?") and not stripped.startswith("#")


def read_notebook(data: bytes) -> NotebookSource:
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as error:
        raise NotebookError(f"not a notebook: invalid JSON ({error})") from None
    cells = document.get("cells") if isinstance(document, dict) else None
    if not isinstance(cells, list):
        raise NotebookError("not a notebook: no list of cells")
    lines: list[str] = []
    origins: list[tuple[int, int]] = []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"not a notebook: cell {number} is not an object")
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"not a notebook: cell {number} has no text source")
        cell_magic = source.lstrip().startswith("%%")
        for line_number, line in enumerate(source.splitlines(), start=1):
            lines.append(f"# {line}" if cell_magic or _is_magic(line) else line)
            origins.append((number, line_number))
    return NotebookSource("\n".join(lines) + "\n", tuple(origins))
