"""The rule registry: every module in this package that defines a Rule subclass contributes it.

`registered_rules()` reads them from the table written from these modules (registry.py): choosing the rules and
prefiltering a file by their trigger words imports none of them. `all_rules()` imports them all.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pitfall_lint.rules.base import Rule
    from pitfall_lint.rules.registry import RuleEntry

# The modules that define no rule.
NOT_RULES = frozenset({"base", "registry", "table"})


@cache
def all_rules() -> tuple[type[Rule], ...]:
    from pitfall_lint.plugins import subclasses_in
    from pitfall_lint.rules.base import Rule

    rules = {cls.info.code: cls for cls in subclasses_in(__name__, __path__, Rule, NOT_RULES) if hasattr(cls, "info")}
    return tuple(rules[code] for code in sorted(rules))


def registered_rules() -> tuple[RuleEntry, ...]:
    """Every rule, in code order, as the table has it."""
    from pitfall_lint.rules.table import RULES

    return RULES
