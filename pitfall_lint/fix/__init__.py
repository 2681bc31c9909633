"""`check --fix`: rewrite what the rules could work out a fix for, losslessly, with libcst.

Imported only when fixing, so the static check never loads libcst. A pass fixes the findings of one rule, then
the file is checked again: positions move after a rewrite, and a fix only counts when its finding is gone.
"""

from __future__ import annotations

import ast
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

import libcst as cst

from pitfall_lint.diagnostic import Diagnostic, applies
from pitfall_lint.engine import Engine
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.fix.base import Fixer, Located
from pitfall_lint.plugins import subclasses_in
from pitfall_lint.rules.registry import RuleSpec

_MAX_PASSES = 16  # each pass removes at least one finding; this bounds a file with very many


@cache
def all_fixers() -> dict[str, Fixer]:
    found = subclasses_in(__name__, __path__, Fixer, frozenset({"base", "write"}))
    return {cls.code: cls() for cls in found if hasattr(cls, "code")}  # shared bases declare no code


@dataclass(frozen=True)
class FixedSource:
    fixed: bytes
    applied: Counter[str]  # findings removed, per code


def allowed(rules: Iterable[RuleSpec], unsafe: bool) -> frozenset[str]:
    """The codes whose fixes may be applied: the safe ones, and with `unsafe` the others too."""
    return frozenset(r.info.code for r in rules if applies(r.info.fix, unsafe))


def parses(data: bytes, path: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(data, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _fixable(diagnostics: Sequence[Diagnostic], codes: set[str]) -> dict[str, list[Diagnostic]]:
    found: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        if diagnostic.fix is not None and diagnostic.code in codes:
            found.setdefault(diagnostic.code, []).append(diagnostic)
    return found


def fix_source(
    path: str, data: bytes, rules: Sequence[RuleSpec], unsafe: bool, project: ProjectModel | None = None
) -> FixedSource:
    """The source with every applicable fix made; each pass must parse and must remove the findings it fixed.
    Each pass is checked against the file's project (none: the file alone), as the check that found them was."""
    engine = Engine(rules)
    codes = set(allowed(rules, unsafe) & all_fixers().keys())
    applied = Counter[str]()
    diagnostics = engine.check_source(path, data, project).diagnostics
    for _ in range(_MAX_PASSES):
        fixable = _fixable(diagnostics, codes)
        if not fixable:
            break
        code = min(fixable)
        try:
            rewritten = all_fixers()[code].rewrite(Located(cst.parse_module(data)), fixable[code]).bytes
        except cst.ParserSyntaxError:
            break  # Python's parser took it, libcst's did not (a newer syntax): leave the file alone
        after = engine.check_source(path, rewritten, project).diagnostics if parses(rewritten, path) else diagnostics
        removed = sum(d.code == code for d in diagnostics) - sum(d.code == code for d in after)
        if removed <= 0:
            codes.discard(code)  # the rewrite did not help: keep the file as it was and try the other rules
            continue
        data, diagnostics = rewritten, after
        applied[code] += removed
    return FixedSource(data, applied)
