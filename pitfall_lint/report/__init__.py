"""Reporters: each turns the same diagnostics into one output format."""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TextIO

from pitfall_lint.diagnostic import Applicability, Diagnostic, RuleInfo, applies, available_fix
from pitfall_lint.formats import WRITER_MODULES
from pitfall_lint.notebook import NotebookError, file_lines


@dataclass(frozen=True)
class Report:
    diagnostics: Sequence[Diagnostic]
    rules: Sequence[RuleInfo]  # every rule that ran, for formats that describe them
    files_checked: int
    # Text only: the offending lines with a caret and the fix hint; colour.
    show_source: bool = False
    color: bool = False
    statistics: bool = False  # text and JSON: the counts per rule instead of the findings
    hidden_by_baseline: int = 0  # findings left out because the baseline knows them; said in the text summary
    unsafe_fixes: bool = False  # `--unsafe-fixes`: the unsafe fixes are made too, so they count as fixable

    @cached_property
    def rule_of(self) -> dict[str, RuleInfo]:
        return {rule.code: rule for rule in self.rules}

    def available_fix(self, d: Diagnostic) -> Applicability | None:
        return available_fix(d, self.rule_of.get(d.code))

    def fixable(self, d: Diagnostic) -> bool:
        """Whether `check --fix` (with this run's `--unsafe-fixes`) would fix it: Ruff's `[*]`."""
        return applies(self.available_fix(d), self.unsafe_fixes)

    def held_back_fixes(self) -> int:
        """The fixes that exist but that only `--unsafe-fixes` would make."""
        return sum(fix is not None and not applies(fix, self.unsafe_fixes) for fix in map(self.available_fix, self.diagnostics))


@dataclass(frozen=True)
class Statistic:
    code: str
    name: str
    count: int
    fixable: bool  # whether `check --fix` would fix some of them; Ruff's statistics say both
    fixable_count: int


def statistics(report: Report) -> list[Statistic]:
    """The findings per rule, the most frequent first, then by code."""
    counts = Counter(d.code for d in report.diagnostics)
    fixable = Counter(d.code for d in report.diagnostics if report.fixable(d))
    names = {rule.code: rule.name for rule in report.rules}
    return [
        Statistic(code, names.get(code, ""), count, fixable[code] > 0, fixable[code])
        for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    ]


Writer = Callable[[Report, TextIO], None]


class FileLines:
    """The lines of the file itself that a finding spans. For a notebook finding (its line counts within its cell),
    the lines of the .ipynb that hold those source lines, each notebook read once; None when that cannot be
    told, for a place in the file is never given a wrong line."""

    def __init__(self) -> None:
        self._notebooks: dict[str, dict[int, tuple[int, ...]] | None] = {}

    def __call__(self, d: Diagnostic) -> tuple[int, int] | None:
        if d.cell is None:
            return d.line, d.end_line
        if d.path not in self._notebooks:
            try:
                with open(d.path, "rb") as handle:
                    self._notebooks[d.path] = file_lines(handle.read())
            except (OSError, NotebookError):
                self._notebooks[d.path] = None
        lines = (self._notebooks[d.path] or {}).get(d.cell, ())
        if not 0 < d.line <= d.end_line <= len(lines):
            return None
        return lines[d.line - 1], lines[d.end_line - 1]


def in_cell(d: Diagnostic) -> str:
    """Where a notebook finding is in its cell, for formats whose positions are the file's: 'cell 4, line 1, column 1'."""
    return f"cell {d.cell}, line {d.line}, column {d.column}"


def place(d: Diagnostic) -> str:
    """Where a finding is, as the text format says it: 'save.py:4:1', 'nb.ipynb:cell 1:4:1'."""
    cell = f"cell {d.cell}:" if d.cell is not None else ""
    return f"{d.path}:{cell}{d.line}:{d.column}"


def writer(output_format: str) -> Writer:
    """The format's module in this package, imported only when the format is chosen."""
    write: Writer = importlib.import_module(f"{__name__}.{WRITER_MODULES[output_format]}").write
    return write
