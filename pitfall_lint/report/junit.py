"""JUnit XML, which every CI shows as test results: a testsuite per file with findings, a failed testcase per
finding (as Ruff writes it); a run that finds nothing is one passing testcase, for CIs that fail on an empty report."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby
from pathlib import PurePath
from typing import TextIO
from xml.etree import ElementTree

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.report import FileLines, Report, in_cell, place


def _counts(element: ElementTree.Element, tests: int, failures: int) -> None:
    for key, value in (("tests", tests), ("failures", failures), ("errors", 0), ("skipped", 0)):
        element.set(key, str(value))


def _testcase(suite: ElementTree.Element, d: Diagnostic, file_lines: FileLines) -> None:
    # Where in the file, in the name: CIs key a testcase by its class and name, and would merge two of one rule.
    where = f"line {d.line}, column {d.column}" if d.cell is None else in_cell(d)
    case = ElementTree.SubElement(suite, "testcase", name=f"{d.code} {d.name} at {where}")
    case.set("classname", str(PurePath(d.path).with_suffix("")))  # as Ruff: a consumer reads a dot as a package's
    case.set("file", d.path)
    lines = file_lines(d)
    if lines is not None:  # the file's own line; for a notebook, the .ipynb line that holds it (its columns are the JSON's)
        case.set("line", str(lines[0]))
    if d.cell is None:
        case.set("column", str(d.column))
    failure = ElementTree.SubElement(case, "failure", message=d.message, type=d.code)
    failure.text = f"{place(d)}: {d.code} {d.message}"


def _suites(root: ElementTree.Element, diagnostics: Iterable[Diagnostic]) -> None:
    file_lines = FileLines()
    for path, found in groupby(diagnostics, key=lambda d: d.path):  # sorted by path: each file's findings together
        suite = ElementTree.SubElement(root, "testsuite", name=path)
        for d in found:
            _testcase(suite, d, file_lines)
        _counts(suite, len(suite), len(suite))


def write(report: Report, out: TextIO) -> None:
    root = ElementTree.Element("testsuites", name="pitfall-lint")
    findings = len(report.diagnostics)
    _counts(root, findings or 1, findings)
    if findings:
        _suites(root, report.diagnostics)
    else:
        suite = ElementTree.SubElement(root, "testsuite", name="pitfall-lint")
        _counts(suite, 1, 0)
        ElementTree.SubElement(suite, "testcase", name="All checks passed", classname="pitfall-lint")
    ElementTree.indent(root)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n')
    # Characters past ASCII as references: the declaration holds whatever encoding the stream has.
    out.write(ElementTree.tostring(root, encoding="us-ascii").decode("ascii"))
    out.write("\n")
