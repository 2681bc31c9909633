"""Which rules run: the configuration, then the command line's select / extend-select / ignore, as in Ruff.

One place for `check`, `verify` and the flake8 plugin, so that each runs the rules the others would.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pitfall_lint.config import Config, check_codes, find_pyproject, load_config, matches
from pitfall_lint.diagnostic import PARSE_ERROR, RuleInfo
from pitfall_lint.rules import all_rules
from pitfall_lint.rules.base import Rule


def rule_infos() -> list[RuleInfo]:
    return [PARSE_ERROR, *(rule.info for rule in all_rules())]


def known_codes() -> list[str]:
    return [info.code for info in rule_infos()]


def nearest_config(config_path: str | None, start: Path | None = None) -> Config:
    """The given pyproject.toml, else the nearest one from `start` (the current folder by default); raises
    ConfigError."""
    source = Path(config_path) if config_path else find_pyproject(start or Path.cwd())
    return load_config(source, known_codes())


def selected_rules(
    config: Config, select: Sequence[str] | None, extend: Sequence[str], ignore: Sequence[str]
) -> tuple[list[type[Rule]], list[str]]:
    """The rules to run and every ignored selector. A `select` given (even empty) replaces the configured one;
    raises ConfigError for a selector that matches no rule."""
    codes = known_codes()
    select_given = check_codes("--select", select, codes) if select is not None else None
    extend_all = (*config.extend_select, *check_codes("--extend-select", extend, codes))
    ignore_all = (*config.ignore, *check_codes("--ignore", ignore, codes))
    chosen = select_given if select_given is not None else config.select

    def enabled(info: RuleInfo) -> bool:
        on = matches(info.code, chosen) if chosen is not None else info.enabled_by_default
        return (on or matches(info.code, extend_all)) and not matches(info.code, ignore_all)

    return [rule for rule in all_rules() if enabled(rule.info)], list(ignore_all)
