"""`path:line:col: CODE message`, one per line, then a summary, as ruff prints."""

from __future__ import annotations

from typing import TextIO

from pitfall_lint.report import Report


def write(report: Report, out: TextIO) -> None:
    for d in report.diagnostics:
        out.write(f"{d.path}:{d.line}:{d.column}: {d.code} {d.message}\n")
    count = len(report.diagnostics)
    if count:
        files = len({d.path for d in report.diagnostics})
        noun = "diagnostic" if count == 1 else "diagnostics"
        out.write(f"Found {count} {noun} in {files} of {report.files_checked} files checked.\n")
    else:
        out.write(f"All checks passed! ({report.files_checked} files checked)\n")
