"""`--fix` and `--diff` over the files of one check: read, fix in memory, then write atomically or print a diff."""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import click

from pitfall_lint.config import matches
from pitfall_lint.checking import CheckRun
from pitfall_lint.diagnostic import applies, available_fix
from pitfall_lint.fix import fix_source
from pitfall_lint.fix.write import ChangedOnDisk, replace_if_unchanged
from pitfall_lint.rules.registry import RuleSpec


@dataclass
class FixOutcome:
    changed_paths: list[str] = field(default_factory=list)
    fixed: int = 0
    errors: int = 0
    rewritten: dict[str, bytes] = field(default_factory=dict)  # the fixed sources of the run's contents (stdin), unwritten


def _source(run: CheckRun, path: str) -> bytes:
    """What the check read: the content that stood in for the file (stdin), else the file."""
    if path in run.contents:
        return run.contents[path]
    with open(path, "rb") as handle:
        return handle.read()


def _diff(path: str, before: bytes, after: bytes) -> bytes:
    old, new = (path, path) if os.path.isabs(path) else (f"a/{path}", f"b/{path}")  # git's prefixes for relative paths
    lines = difflib.diff_bytes(
        difflib.unified_diff, before.splitlines(keepends=True), after.splitlines(keepends=True), old.encode(), new.encode()
    )
    return b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)


def fix_files(
    run: CheckRun, rules: Sequence[RuleSpec], unsafe: bool, diff: bool, ignored_for: Callable[[str], tuple[str, ...]]
) -> FixOutcome:
    infos = {r.info.code: r.info for r in rules}
    outcome, held_back = FixOutcome(), 0
    for result in run.results:
        skipped = ignored_for(result.path)
        fixes = [available_fix(d, infos.get(d.code)) for d in result.diagnostics if not matches(d.code, skipped)]
        held_back += sum(fix is not None and not applies(fix, unsafe) for fix in fixes)
        if not any(applies(fix, unsafe) for fix in fixes):
            continue
        try:
            data = _source(run, result.path)
            rules_here = [r for r in rules if not matches(r.info.code, skipped)]
            fixed = fix_source(result.path, data, rules_here, unsafe, run.projects.get(result.path))
            if not fixed.applied:
                continue
            if diff:
                sys.stdout.buffer.write(_diff(result.path, data, fixed.fixed))
                sys.stdout.flush()
            elif result.path in run.contents:
                outcome.rewritten[result.path] = fixed.fixed
            else:
                replace_if_unchanged(result.path, data, fixed.fixed)
        except ChangedOnDisk:
            click.echo(f"warning: {result.path}: changed on disk while it was being fixed; left as it is", err=True)
            continue
        except OSError as error:
            click.echo(f"error: {result.path}: cannot fix: {error.strerror or error}", err=True)
            outcome.errors += 1
            continue
        outcome.changed_paths.append(result.path)
        outcome.fixed += sum(fixed.applied.values())
    changed = len(outcome.changed_paths)
    files = "file" if changed == 1 else "files"
    verb = "Would fix" if diff else "Fixed"
    more = f" ({held_back} more with --unsafe-fixes)" if held_back else ""
    click.echo(f"{verb} {outcome.fixed} finding{'' if outcome.fixed == 1 else 's'} in {changed} {files}{more}.", err=True)
    return outcome
