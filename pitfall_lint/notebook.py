"""Jupyter notebooks: the code cells joined into one module, and every line traced back to its cell."""

from __future__ import annotations

import ast
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
    # For each line: the characters of indentation taken off it, as IPython does when a cell's first line is
    # indented (`leading_indent` in IPython/core/inputtransformer2.py).
    dedents: tuple[int, ...] = ()

    def origin(self, line: int) -> tuple[int, int]:
        return self.origins[min(max(line, 1), len(self.origins)) - 1] if self.origins else (1, line)

    def dedent(self, line: int) -> int:
        return self.dedents[min(max(line, 1), len(self.dedents)) - 1] if self.dedents else 0


# `files = !ls`, `result = %timeit -o f()`: IPython assigns a shell command's or a magic's output.
_ASSIGNED_MAGIC = re.compile(r"\s*[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%]")
# Magics and shell aliases IPython runs without their `%` (automagic): `pip install x`, `ls data/`.
_AUTOMAGIC = re.compile(r"\s*(?:pip|conda|mamba|cd|ls|cat|cp|mv|rm|rmdir|mkdir)\s")


def _is_magic(line: str) -> bool:
    """IPython's `%magic`, `!shell` and `?help` lines, assignments of their output, and magics without their `%`
    where the line is no Python: not Python."""
    stripped = line.lstrip()
    return (
        stripped.startswith(("%", "!", "?"))
        or stripped.endswith("?") and not stripped.startswith("#")
        or _ASSIGNED_MAGIC.match(line) is not None
        or _AUTOMAGIC.match(line) is not None and not _compiles(stripped)
    )


def _compiles(statement: str) -> bool:
    """Syntax newer than this interpreter's is read as the check reads it: lowered (pitfall_lint.lowering)."""
    try:
        compile(statement, "<cell>", "exec", ast.PyCF_ONLY_AST)
    except SyntaxError:
        from pitfall_lint.lowering import lower  # here: only a line that fails to compile needs it

        lowered = lower(statement).text
        return lowered != statement and _compiles(lowered)
    except (ValueError, MemoryError, RecursionError):  # a line nested past the parser's depth too
        return False
    return True


def _as_python(source: str) -> Iterator[tuple[str, int]]:
    """Each line of a code cell as Python, with the indentation taken off it. As IPython reads a cell: an indented
    first line takes its indentation off every line; a cell magic's cell is not Python (`%%bash`), its lines
    comments; a magic line is a statement where IPython runs it (`if IN_COLAB:\n    !pip install x`), `pass` at its
    indentation; a line a magic goes on in, after a backslash (`!python x.py \\`), is a comment; a line Python goes
    on in is Python (`"%s" \\` then `% x`)."""
    cell_lines = source.splitlines()
    first = next((line for line in cell_lines if line.strip()), "")
    indent = first[: len(first) - len(first.lstrip(" \t"))]
    cell_magic = source.lstrip().startswith("%%")
    magic_continues = python_continues = False
    for line in cell_lines:
        dedent = len(indent) if indent and line.startswith(indent) else 0
        line = line[dedent:]
        magic = cell_magic or magic_continues or not python_continues and _is_magic(line)
        if magic and not (cell_magic or magic_continues):
            stripped = line.lstrip()
            yield f"{line[: len(line) - len(stripped)]}pass  # {stripped}", dedent
        else:
            yield (f"# {line}" if magic else line), dedent
        magic_continues, python_continues = magic and line.endswith("\\"), not magic and line.endswith("\\")


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
    dedents: list[int] = []
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
        for line_number, (line, dedent) in enumerate(_as_python(source), start=1):
            lines.append(line)
            origins.append((number, line_number))
            dedents.append(dedent)
    return NotebookSource("\n".join(lines) + "\n", tuple(origins), tuple(dedents))


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
