"""`path:line:col: CODE message`, one per line, then a summary, as ruff prints; optionally with source."""

from __future__ import annotations

import linecache
from typing import TextIO

import click

from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.report import Report, place, statistics


def _style(text: str, color: bool, **style: object) -> str:
    return click.style(text, **style) if color else text  # type: ignore[arg-type]


def _source(d: Diagnostic, hint: str, color: bool) -> list[str]:
    """Ruff's full format: the flagged lines, a caret under the span, the fix hint."""
    last = d.line if d.end_line - d.line > 3 else d.end_line
    linecache.checkcache(d.path)
    lines = [linecache.getline(d.path, n).rstrip("\r\n") for n in range(d.line, last + 1)]
    if not any(lines):
        return []
    width = len(str(last))
    bar = _style("|", color, fg="blue", bold=True)
    shown = [f"{' ' * width} {bar}"]
    for offset, text in enumerate(lines):
        number = d.line + offset
        shown.append(f"{_style(str(number).rjust(width), color, fg='blue', bold=True)} {bar} {text}")
        start = d.column - 1 if number == d.line else len(text) - len(text.lstrip())
        end = d.end_column - 1 if number == d.end_line else len(text)
        carets = "^" * max(1, end - start)
        label = f" {d.code}" if number == last else ""
        shown.append(f"{' ' * width} {bar} {' ' * start}{_style(carets + label, color, fg='red', bold=True)}")
    for related in d.related:  # a second pointer: the place in the project the finding rests on
        shown.append(f"{' ' * width} {_style('=', color, fg='blue', bold=True)} {_style('note:', color, bold=True)} {related.message} at {related.path}:{related.line}")
    if hint:
        shown.append(f"{' ' * width} {_style('=', color, fg='blue', bold=True)} {_style('help:', color, bold=True)} {hint}")
    return [*shown, ""]


def _counted(number: int, noun: str, plural: str = "") -> str:
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def _fix_mark(color: bool) -> str:
    """Ruff's `[*]`: `--fix` would fix it."""
    return f"[{_style('*', color, fg='cyan')}]"


def _fixes_summary(report: Report, color: bool) -> str:
    """Ruff's line under the count: how many `--fix` would fix, and how many more only with `--unsafe-fixes`."""
    fixable = sum(map(report.fixable, report.diagnostics))
    held_back = report.held_back_fixes()
    unsafe = f"{_counted(held_back, 'unsafe fix', 'unsafe fixes')} available with `--fix --unsafe-fixes`"
    if fixable and held_back:
        return f"{_fix_mark(color)} {fixable} fixable with `--fix` ({unsafe}).\n"
    if fixable:
        return f"{_fix_mark(color)} {fixable} fixable with `--fix`.\n"
    return f"{unsafe}.\n" if held_back else ""


def summary(report: Report, color: bool = False) -> str:
    """The lines under the findings: how many in how many files, and what `--fix` would fix; or that all passed."""
    count = len(report.diagnostics)
    hidden = report.hidden_by_baseline
    baseline = f"; {_counted(hidden, 'finding')} hidden by the baseline" if hidden else ""
    checked = f"{_counted(report.files_checked, 'file')} checked{baseline}"
    if not count:
        return f"All checks passed! ({checked})\n"
    files = len({d.path for d in report.diagnostics})
    return f"Found {_counted(count, 'diagnostic')} in {files} of {checked}.\n" + _fixes_summary(report, color)


def write(report: Report, out: TextIO) -> None:
    color = report.color
    if report.statistics:
        rows = statistics(report)
        marks = any(row.fixable for row in rows)  # as Ruff: a column of marks only when something is fixable
        for row in rows:
            mark = (f"{_fix_mark(color)} " if row.fixable else "[ ] ") if marks else ""
            out.write(f"{row.count:>5}\t{_style(row.code, color, fg='red', bold=True)}\t{mark}{row.name}\n")
        return
    hints = {rule.code: rule.hint for rule in report.rules}
    for d in report.diagnostics:
        location = _style(f"{place(d)}:", color, bold=True)
        mark = f" {_fix_mark(color)}" if report.fixable(d) else ""
        out.write(f"{location} {_style(d.code, color, fg='red', bold=True)}{mark} {d.message}\n")
        if report.show_source and d.cell is None:
            out.writelines(line + "\n" for line in _source(d, hints.get(d.code, ""), color))
    out.write(summary(report, color))
