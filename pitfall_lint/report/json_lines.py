"""JSON Lines: each finding as the JSON format's object, one a line, with no envelope, for tools that stream."""

from __future__ import annotations

import json
from typing import TextIO

from pitfall_lint.report import Report
from pitfall_lint.report.json_format import diagnostic


def write(report: Report, out: TextIO) -> None:
    out.writelines(json.dumps(diagnostic(report, d), separators=(",", ":")) + "\n" for d in report.diagnostics)
