"""SARIF 2.1.0, the format GitHub code scanning accepts, each rule with its document."""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any, TextIO

from pitfall_lint import __version__
from pitfall_lint.diagnostic import Diagnostic, RuleInfo
from pitfall_lint.docs import rule_document, what_it_does
from pitfall_lint.report import FileLines, Report, in_cell

_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def _artifact(path: str) -> dict[str, str]:
    return {"uri": PurePath(path).as_posix(), "uriBaseId": "%SRCROOT%"}


def _location(path: str, region: dict[str, int] | None, message: str | None = None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": _artifact(path)}
    if region is not None:
        physical["region"] = region
    location: dict[str, Any] = {"physicalLocation": physical}
    if message is not None:
        location["message"] = {"text": message}
    return location


def _rule(rule: RuleInfo) -> dict[str, Any]:
    """The rule's document as its help, as code scanning shows it beside each alert."""
    document = rule_document(rule.code, rule.name)
    described: dict[str, Any] = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": (document and what_it_does(document)) or rule.summary},
    }
    if document is not None:
        described["help"] = {"text": document, "markdown": document}
    described["defaultConfiguration"] = {"level": _LEVELS[rule.severity]}
    return described


def _result(d: Diagnostic, index: int, file_lines: FileLines) -> dict[str, Any]:
    lines = file_lines(d)
    region: dict[str, int] | None = None
    if d.cell is None:
        region = {"startLine": d.line, "startColumn": d.column, "endLine": d.end_line, "endColumn": d.end_column}
    elif lines is not None:
        # The lines of the .ipynb that hold the source; columns there are the JSON's, so none is given.
        region = {"startLine": lines[0], "endLine": lines[1]}
    result: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": index,
        "level": _LEVELS[d.severity],
        "message": {"text": d.message if d.cell is None else f"{in_cell(d)}: {d.message}"},
        "locations": [_location(d.path, region)],
    }
    if d.cell is not None:
        result["properties"] = {
            "notebookCell": d.cell, "cellLine": d.line, "cellColumn": d.column,
            "cellEndLine": d.end_line, "cellEndColumn": d.end_column,
        }
    if d.related:
        result["relatedLocations"] = [
            {"id": number, **_location(r.path, {"startLine": r.line}, r.message)} for number, r in enumerate(d.related, 1)
        ]
    return result


def write(report: Report, out: TextIO) -> None:
    rules = sorted(report.rules, key=lambda r: r.code)
    index = {rule.code: i for i, rule in enumerate(rules)}
    file_lines = FileLines()
    results = [_result(d, index[d.code], file_lines) for d in report.diagnostics]
    log = {
        "$schema": _SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "pitfall-lint",
                        "version": __version__,
                        "rules": [_rule(rule) for rule in rules],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    json.dump(log, out, indent=2)
    out.write("\n")
