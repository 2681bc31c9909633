"""Jupyter notebooks: the code cells joined into one module, and every line traced back to its cell."""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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


class _Scanner:
    """Just enough of a JSON reader to tell where the cells' source strings start; every other value is read
    whole, at the speed of the json module."""

    _SPACE = re.compile(r"[ \t\n\r]*")
    _DECODER = json.JSONDecoder()

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def peek(self) -> str:
        self.at = self._SPACE.match(self.text, self.at).end()  # type: ignore[union-attr]  # matches the empty string
        return self.text[self.at : self.at + 1]

    def value(self) -> Any:
        self.peek()
        value, self.at = self._DECODER.raw_decode(self.text, self.at)
        return value

    def _expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} at character {self.at}")
        self.at += 1

    def _more(self, closing: str) -> bool:
        if self.peek() == ",":
            self.at += 1
            return True
        self._expect(closing)
        return False

    def members(self) -> Iterator[str]:
        """The keys of an object; after each, the caller reads its value."""
        self._expect("{")
        if self.peek() == "}":
            self.at += 1
            return
        while True:
            key = self.value()
            self._expect(":")
            yield key
            if not self._more("}"):
                return

    def items(self) -> Iterator[int]:
        """The elements of an array, as the offsets where they start; the caller reads each."""
        self._expect("[")
        if self.peek() == "]":
            self.at += 1
            return
        while True:
            self.peek()
            yield self.at
            if not self._more("]"):
                return


def _code_cell_sources(text: str) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """Each code cell's number (1-based, all cells counted) and its source strings with their offsets in `text`."""
    scan = _Scanner(text)
    for key in scan.members():
        if key != "cells":
            scan.value()
            continue
        for number, _ in enumerate(scan.items(), start=1):
            if scan.peek() != "{":
                scan.value()
                continue
            kind, parts = None, []
            for field in scan.members():
                if field == "cell_type":
                    kind = scan.value()
                elif field == "source" and scan.peek() == "[":
                    parts = [(offset, scan.value()) for offset in scan.items()]
                elif field == "source":
                    parts = [(scan.at, scan.value())]
                else:
                    scan.value()
            if kind == "code":
                yield number, parts


def file_lines(data: bytes) -> dict[int, tuple[int, ...]]:
    """For each code cell (numbered as in read_notebook), the line of the .ipynb file that holds each of its
    source lines: Jupyter writes every source line as a JSON string on a line of its own; a source kept as one
    string maps all its lines to that string's line. Raises NotebookError when this is not a notebook."""
    try:
        text = data.decode("utf-8")
        cells = list(_code_cell_sources(text))
    except (ValueError, UnicodeDecodeError) as error:
        raise NotebookError(f"not a notebook: {error}") from None
    lines: dict[int, tuple[int, ...]] = {}
    newlines_before, counted_to = 0, 0  # strings come in document order: count newlines once, going forward
    for number, parts in cells:
        if not parts or not all(isinstance(part, str) for _, part in parts):
            continue
        part_lines, starts = [], []
        start = 0
        for offset, part in parts:
            newlines_before += text.count("\n", counted_to, offset)
            counted_to = offset
            part_lines.append(newlines_before + 1)
            starts.append(start)
            start += len(part)
        position, in_file = 0, []
        for line in "".join(part for _, part in parts).splitlines(keepends=True):
            in_file.append(part_lines[bisect.bisect_right(starts, position) - 1])
            position += len(line)
        lines[number] = tuple(in_file)
    return lines
