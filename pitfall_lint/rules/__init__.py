"""The rule registry: every module in this package that defines a Rule subclass contributes it."""

from __future__ import annotations

from functools import cache

from pitfall_lint.plugins import subclasses_in
from pitfall_lint.rules.base import Rule


@cache
def all_rules() -> tuple[type[Rule], ...]:
    rules = {cls.info.code: cls for cls in subclasses_in(__name__, __path__, Rule, frozenset({"base"})) if hasattr(cls, "info")}
    return tuple(rules[code] for code in sorted(rules))
