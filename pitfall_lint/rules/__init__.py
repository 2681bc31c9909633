"""The rule registry: every module in this package that defines a Rule subclass contributes it."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from pitfall_lint.rules.base import Rule


@cache
def all_rules() -> tuple[type[Rule], ...]:
    for module in pkgutil.iter_modules(__path__):
        if module.name != "base":
            importlib.import_module(f"{__name__}.{module.name}")
    rules = {cls.info.code: cls for cls in _subclasses(Rule) if hasattr(cls, "info")}
    return tuple(rules[code] for code in sorted(rules))


def _subclasses(cls: type[Rule]) -> list[type[Rule]]:
    found: list[type[Rule]] = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found
