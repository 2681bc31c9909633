"""Reporters: each turns the same diagnostics into one output format."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TextIO

from pitfall_lint.diagnostic import Diagnostic, RuleInfo


@dataclass(frozen=True)
class Report:
    diagnostics: Sequence[Diagnostic]
    rules: Sequence[RuleInfo]  # every rule that ran, for formats that describe them
    files_checked: int
    # Text only: the offending lines with a caret and the fix hint; colour; counts per rule instead.
    show_source: bool = False
    color: bool = False
    statistics: bool = False
    hidden_by_baseline: int = 0  # findings left out because the baseline knows them; said in the text summary


Writer = Callable[[Report, TextIO], None]


def writers() -> dict[str, Writer]:
    from pitfall_lint.report import github, json_format, sarif, text

    return {"text": text.write, "json": json_format.write, "github": github.write, "sarif": sarif.write}
