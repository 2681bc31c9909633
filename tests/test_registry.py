"""The rule table (pitfall_lint/rules/table.py) says of every rule what its module says: a run chooses the rules
and prefilters files from the table alone, and imports a rule's module only for a file that holds its words."""

from __future__ import annotations

from dataclasses import astuple

from pitfall_lint.rules import all_rules, registered_rules
from pitfall_lint.rules.registry import TABLE, RuleEntry, table_source


def test_the_table_is_what_the_rule_modules_write() -> None:
    """A rule changed without `python -m pitfall_lint.rules.registry` run again fails here."""
    assert TABLE.read_text(encoding="utf-8") == table_source(all_rules())


def test_every_rule_of_the_table_loads_the_class_it_describes() -> None:
    loaded = [entry.load() for entry in registered_rules()]
    assert loaded == list(all_rules())
    assert [astuple(entry) for entry in registered_rules()] == [astuple(RuleEntry.of(rule)) for rule in loaded]


def test_a_rule_class_stands_for_itself() -> None:
    """Tests and plugins hand the engine Rule classes where a run hands it registry entries."""
    rule = all_rules()[0]
    assert rule.load() is rule
