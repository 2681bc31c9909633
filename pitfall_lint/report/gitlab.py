"""GitLab Code Quality: a JSON array of issues, each with a fingerprint that holds while lines above it change, so
the merge request widget tells new findings from old ones (GitLab's "Implement a custom tool" format, as Ruff's)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import PurePath
from typing import Any, TextIO

from pitfall_lint import baseline
from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.hashing import blake2b
from pitfall_lint.report import FileLines, Report, in_cell

_SEVERITIES = {"error": "major", "warning": "minor", "info": "info"}


def _path(d: Diagnostic, root: str) -> str:
    """Relative to the repository, as GitLab links it: to $CI_PROJECT_DIR in a GitLab job (as Ruff does), else to
    the working folder."""
    return PurePath(os.path.relpath(os.path.abspath(d.path), root)).as_posix()


def _location(d: Diagnostic, path: str, file_lines: FileLines) -> dict[str, Any]:
    if d.cell is None:
        begin, end = {"line": d.line, "column": d.column}, {"line": d.end_line, "column": d.end_column}
        return {"path": path, "positions": {"begin": begin, "end": end}}
    # The lines of the .ipynb that hold the source (its columns are the JSON's); GitLab needs a line, so the first
    # one when they cannot be told.
    lines = file_lines(d) or (1, 1)
    return {"path": path, "lines": {"begin": lines[0], "end": lines[1]}}


def write(report: Report, out: TextIO) -> None:
    root = os.environ.get("CI_PROJECT_DIR") or os.getcwd()
    file_lines = FileLines()
    seen: Counter[tuple[str, str]] = Counter()
    issues = []
    for d in report.diagnostics:
        path = _path(d, root)
        # The baseline's fingerprint (the code and the flagged source), in this file, and which copy of it: the
        # same line twice in one file gives two issues, each still matched after an edit above it.
        source = baseline.fingerprint(d)
        seen[(path, source)] += 1
        fingerprint = blake2b(f"{path}\n{source}\n{seen[(path, source)]}".encode(), digest_size=8).hexdigest()
        message = d.message if d.cell is None else f"{in_cell(d)}: {d.message}"
        issues.append(
            {
                "check_name": d.code,
                "description": f"{d.code}: {message}",
                "severity": _SEVERITIES[d.severity],
                "fingerprint": fingerprint,
                "location": _location(d, path, file_lines),
            }
        )
    json.dump(issues, out, indent=2)
    out.write("\n")
