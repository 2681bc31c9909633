"""GitHub Actions workflow commands, shown as annotations on the pull request."""

from __future__ import annotations

from typing import TextIO

from pitfall_lint.report import FileLines, Report, in_cell

_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def write(report: Report, out: TextIO) -> None:
    file_lines = FileLines()
    for d in report.diagnostics:
        place: list[tuple[str, object]] = [("file", d.path)]
        lines = file_lines(d)
        if d.cell is None:
            place += [("line", d.line), ("col", d.column), ("endLine", d.end_line), ("endColumn", d.end_column)]
        elif lines is not None:
            # The lines of the .ipynb that hold the source; columns there are the JSON's, so none is given.
            place += [("line", lines[0]), ("endLine", lines[1])]
        title = f"{d.code} {d.name}" + (f" in {in_cell(d)}" if d.cell is not None else "")
        properties = ",".join(f"{key}={_escape_property(str(value))}" for key, value in (*place, ("title", title)))
        out.write(f"::{_LEVELS[d.severity]} {properties}::{_escape_data(f'{d.code} {d.message}')}\n")
