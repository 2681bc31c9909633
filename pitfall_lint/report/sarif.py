"""SARIF 2.1.0, the format GitHub code scanning accepts."""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import TextIO

from pitfall_lint import __version__
from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.report import Report

_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def _location(path: str, region: dict[str, int], message: str | None = None) -> dict[str, object]:
    location: dict[str, object] = {
        "physicalLocation": {"artifactLocation": {"uri": PurePath(path).as_posix(), "uriBaseId": "%SRCROOT%"}, "region": region}
    }
    if message is not None:
        location["message"] = {"text": message}
    return location


def _result(d: Diagnostic, rule_index: int) -> dict[str, object]:
    region = {"startLine": d.line, "startColumn": d.column, "endLine": d.end_line, "endColumn": d.end_column}
    result: dict[str, object] = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": _LEVELS[d.severity],
        "message": {"text": d.message},
        "locations": [_location(d.path, region)],
    }
    if d.related:
        result["relatedLocations"] = [
            {"id": number, **_location(r.path, {"startLine": r.line}, r.message)} for number, r in enumerate(d.related, 1)
        ]
    return result


def write(report: Report, out: TextIO) -> None:
    rules = sorted(report.rules, key=lambda r: r.code)
    index = {rule.code: i for i, rule in enumerate(rules)}
    results = [_result(d, index[d.code]) for d in report.diagnostics]
    log = {
        "$schema": _SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "pitfall-lint",
                        "version": __version__,
                        "rules": [
                            {
                                "id": rule.code,
                                "name": rule.name,
                                "shortDescription": {"text": rule.summary},
                                "defaultConfiguration": {"level": _LEVELS[rule.severity]},
                            }
                            for rule in rules
                        ],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    json.dump(log, out, indent=2)
    out.write("\n")
