"""Each finding's fix as one replacement in the file as it stands, for reports that offer a fix without making it
(SARIF's `fixes`). Each is made alone on the file as read, so each applies to that file by itself."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.fix import all_fixers, parses
from pitfall_lint.fix.base import Located

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")  # each line with its end, as Python counts lines
_LINE_END = re.compile(r"(?:\r\n|\r|\n)\Z")


@dataclass(frozen=True)
class Replacement:
    """The text from `start` up to `end` (1-based line and column, columns in characters) becomes `text`."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str


def _position(text: str, offset: int) -> tuple[int, int]:
    before = _LINES.findall(text[:offset])
    if not before or _LINE_END.search(before[-1]):  # at the start of a line
        return len(before) + 1, 1
    return len(before), len(before[-1]) + 1


def _replacement(before: str, after: str) -> Replacement:
    """The lines that differ, replaced whole so that the edit reads as code. Where the old and the new lines end the
    same way, that line end is kept rather than replaced, so the edit ends on the last line it changes (a file's
    last line included) rather than at the start of the next."""
    old, new = _LINES.findall(before), _LINES.findall(after)
    same = 0
    while same < min(len(old), len(new)) and old[same] == new[same]:
        same += 1
    kept = 0
    while kept < min(len(old), len(new)) - same and old[-1 - kept] == new[-1 - kept]:
        kept += 1
    start = sum(map(len, old[:same]))
    removed, added = "".join(old[same : len(old) - kept]), "".join(new[same : len(new) - kept])
    ending, new_ending = _LINE_END.search(removed), _LINE_END.search(added)
    if ending and new_ending and ending[0] == new_ending[0]:
        removed, added = removed[: ending.start()], added[: new_ending.start()]
    return Replacement(_position(before, start), _position(before, start + len(removed)), added)


def replacements(path: str, diagnostics: Sequence[Diagnostic], data: bytes | None = None) -> dict[Diagnostic, Replacement]:
    """The findings of one file whose fixer rewrites them into code that parses; none if the file cannot be read or
    libcst cannot parse it. `data` stands in for the file on disk (an editor's buffer)."""
    try:
        if data is None:
            with open(path, "rb") as handle:
                data = handle.read()
        module = cst.parse_module(data)
    except (OSError, cst.ParserSyntaxError):
        return {}
    located = Located(module)
    found = {}
    for diagnostic in diagnostics:
        fixed = all_fixers()[diagnostic.code].rewrite(located, [diagnostic])
        if fixed.code != module.code and parses(fixed.bytes, path):
            found[diagnostic] = _replacement(module.code, fixed.code)
    return found
