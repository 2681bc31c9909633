"""A Markdown summary for a CI job's page (GitHub's step summary): the counts, the findings per rule, then the first
findings; the annotations and the other formats carry them all."""

from __future__ import annotations

import re
from typing import TextIO

from pitfall_lint.report import Report, place, statistics
from pitfall_lint.report.text import summary

SHOWN = 100  # GitHub drops a step summary over 1 MiB whole; a hundred rows stay far below it
_CODE_SPAN_OR_SPECIAL = re.compile(r"(`[^`]*`)|([\\*_<>\[\]])")


def _text(message: str) -> str:
    """A message's code spans as they are, and outside them the characters Markdown would read as markup escaped
    (`__main__` in prose is not to turn bold)."""
    return _CODE_SPAN_OR_SPECIAL.sub(lambda match: match[1] or "\\" + match[2], message)


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def _row(*cells: str) -> str:
    """A table row: a pipe would end a cell early, a line break the row."""
    return "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |\n"


def write(report: Report, out: TextIO) -> None:
    out.write("## pitfall-lint\n\n" + summary(report).replace("\n", "\n\n").rstrip("\n") + "\n")  # a paragraph a line
    if not report.diagnostics:
        return
    out.write("\n" + _row("Code", "Rule", "Findings", "Fixable with `--fix`") + "| --- | --- | ---: | ---: |\n")
    out.writelines(_row(row.code, row.name, str(row.count), str(row.fixable_count)) for row in statistics(report))
    out.write("\n" + _row("Place", "Code", "Message") + "| --- | --- | --- |\n")
    out.writelines(_row(_code(place(d)), d.code, _text(d.message)) for d in report.diagnostics[:SHOWN])
    left = len(report.diagnostics) - SHOWN
    if left > 0:
        out.write(f"\n{left} more not shown here.\n")
