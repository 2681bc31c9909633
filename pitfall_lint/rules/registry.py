"""What is known of each rule before its module is imported, as Ruff's and flake8's registries know it: a file that
holds no rule's trigger words, `rules` and `explain` import no rule module and none of the analyses they build on.

The table (table.py) is written from the rule modules by `python -m pitfall_lint.rules.registry`, and a test holds it
to them; the engine imports a rule's module only for a file that holds the rule's trigger words.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pitfall_lint.diagnostic import RuleInfo

if TYPE_CHECKING:
    from pitfall_lint.rules.base import Rule

TABLE = Path(__file__).with_name("table.py")


class RuleSpec(Protocol):
    """A rule as a run chooses and prefilters it: a registry entry, or the Rule class itself (tests, plugins)."""

    @property
    def info(self) -> RuleInfo: ...
    @property
    def triggers(self) -> tuple[tuple[str, ...], ...]: ...
    @property
    def suffixes(self) -> tuple[str, ...]: ...
    @property
    def runtime_only(self) -> bool: ...
    def load(self) -> type[Rule]: ...


@dataclass(frozen=True, eq=False)
class RuleEntry:
    """A row of the table: the rule's attributes that decide whether it runs on a file, and where its class is. One
    entry per rule, compared and hashed by identity as a class is (a run groups its files by their rules)."""

    info: RuleInfo
    module: str
    class_name: str
    triggers: tuple[tuple[str, ...], ...]
    suffixes: tuple[str, ...]
    runtime_only: bool

    def load(self) -> type[Rule]:
        return getattr(importlib.import_module(self.module), self.class_name)  # type: ignore[no-any-return]

    @classmethod
    def of(cls, rule: type[Rule]) -> RuleEntry:
        return cls(rule.info, rule.__module__, rule.__qualname__, rule.triggers, rule.suffixes, rule.runtime_only)


def table_source(rules: tuple[type[Rule], ...]) -> str:
    """The text of table.py for these rules."""
    def row(entry: RuleEntry) -> str:
        values = "".join(f"        {f.name}={getattr(entry, f.name)!r},\n" for f in fields(entry))
        return f"    RuleEntry(\n{values}    ),\n"

    rows = "".join(row(RuleEntry.of(rule)) for rule in rules)
    return (
        '"""Written by `python -m pitfall_lint.rules.registry` from the rule modules: do not edit."""\n\n'
        "from pitfall_lint.diagnostic import RuleInfo\n"
        "from pitfall_lint.rules.registry import RuleEntry\n\n"
        f"RULES = (\n{rows})\n"
    )


if __name__ == "__main__":
    from pitfall_lint.rules import all_rules

    TABLE.write_text(table_source(all_rules()), encoding="utf-8")
