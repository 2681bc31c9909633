"""SARIF 2.1.0, the format GitHub code scanning accepts: each rule with its document, each result with the fix
`--fix` would make."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, TextIO

from pitfall_lint import __version__
from pitfall_lint.diagnostic import Diagnostic, RuleInfo
from pitfall_lint.docs import rule_document, what_it_does
from pitfall_lint.report import FileLines, Report, in_cell

if TYPE_CHECKING:
    from pitfall_lint.fix.edits import Replacement

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


def _fix(d: Diagnostic, replacement: Replacement, description: str) -> dict[str, Any]:
    (start_line, start_column), (end_line, end_column) = replacement.start, replacement.end
    fix: dict[str, Any] = {"description": {"text": description}} if description else {}
    fix["artifactChanges"] = [
        {
            "artifactLocation": _artifact(d.path),
            "replacements": [
                {
                    "deletedRegion": {"startLine": start_line, "startColumn": start_column, "endLine": end_line, "endColumn": end_column},
                    "insertedContent": {"text": replacement.text},
                }
            ],
        }
    ]
    return fix


def _replacements(report: Report) -> Mapping[Diagnostic, Replacement]:
    """The fix of each finding that `--fix` would fix; libcst is loaded only when there is one."""
    by_path: dict[str, list[Diagnostic]] = {}
    for d in report.diagnostics:
        if report.fixable(d):
            by_path.setdefault(d.path, []).append(d)
    if not by_path:
        return {}
    from pitfall_lint.fix.edits import replacements

    return {d: edit for path, found in by_path.items() for d, edit in replacements(path, found).items()}


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
    edits = _replacements(report)
    results = []
    for d in report.diagnostics:
        result = _result(d, index[d.code], file_lines)
        if d in edits:
            result["fixes"] = [_fix(d, edits[d], report.rule_of[d.code].hint)]
        results.append(result)
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
