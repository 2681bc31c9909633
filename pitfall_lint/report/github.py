"""GitHub Actions workflow commands, shown as annotations on the pull request."""

from __future__ import annotations

from typing import TextIO

from pitfall_lint.report import Report

_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def write(report: Report, out: TextIO) -> None:
    for d in report.diagnostics:
        properties = ",".join(
            f"{key}={_escape_property(str(value))}"
            for key, value in (
                ("file", d.path),
                ("line", d.line),
                ("col", d.column),
                ("endLine", d.end_line),
                ("endColumn", d.end_column),
                ("title", f"{d.code} {d.name}"),
            )
        )
        out.write(f"::{_LEVELS[d.severity]} {properties}::{_escape_data(f'{d.code} {d.message}')}\n")
