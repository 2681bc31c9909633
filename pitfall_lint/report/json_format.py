"""One JSON object for programs: the version and every diagnostic with 1-based positions; with --statistics, Ruff's
array of counts per rule."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, TextIO

from pitfall_lint import __version__
from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.report import Report, statistics

_FIELDS = ("code", "name", "path", "cell", "line", "column", "end_line", "end_column", "severity", "message")


def _fix(report: Report, d: Diagnostic) -> dict[str, Any] | None:
    """Whether `--fix` can rewrite it, however it is run (Ruff's `fix`): unsafe ones need `--unsafe-fixes` too."""
    applicability = report.available_fix(d)
    if applicability is None:
        return None
    return {"applicability": applicability, "message": report.rule_of[d.code].hint or None}


def diagnostic(report: Report, d: Diagnostic) -> dict[str, Any]:
    """One finding as JSON: an item of the JSON format's `diagnostics`, a line of JSON Lines."""
    return {**{key: getattr(d, key) for key in _FIELDS}, "fix": _fix(report, d), "related": [asdict(r) for r in d.related]}


def write(report: Report, out: TextIO) -> None:
    document: Any
    if report.statistics:
        document = [asdict(row) for row in statistics(report)]
    else:
        document = {"version": __version__, "diagnostics": [diagnostic(report, d) for d in report.diagnostics]}
    json.dump(document, out, indent=2)
    out.write("\n")
