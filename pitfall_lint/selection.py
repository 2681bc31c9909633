"""Which rules run: the configuration, then the command line's select / extend-select / ignore / preview, as in Ruff.

One place for `check`, `verify` and the flake8 plugin, so that each runs the rules the others would.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from pitfall_lint.config import Config, check_codes, find_pyproject, load_config, matches
from pitfall_lint.diagnostic import PARSE_ERROR, SUPPRESSION_CHECKS, Diagnostic, RuleInfo
from pitfall_lint.rules import registered_rules
from pitfall_lint.rules.registry import RuleSpec


def rule_infos() -> list[RuleInfo]:
    return [PARSE_ERROR, *SUPPRESSION_CHECKS, *(rule.info for rule in registered_rules())]


def known_codes() -> list[str]:
    return [info.code for info in rule_infos()]


def nearest_config(config_path: str | None, start: Path | None = None) -> Config:
    """The given pyproject.toml, else the nearest one from `start` (the current folder by default); raises
    ConfigError."""
    source = Path(config_path) if config_path else find_pyproject(start or Path.cwd())
    return load_config(source, known_codes())


class Selection(NamedTuple):
    rules: list[RuleSpec]
    # Preview rules named by their exact code while preview mode is off: asked for, yet not run.
    preview_not_run: list[str]
    # The engine's own codes that it reports whatever rules run, left out here: to drop from every file's findings.
    left_out: tuple[str, ...]


def selected_rules(
    config: Config, select: Sequence[str] | None, extend: Sequence[str], ignore: Sequence[str], preview: bool | None = None
) -> Selection:
    """A `select` given (even empty) replaces the configured one, and `preview` given (--preview, --no-preview)
    the configured mode; raises ConfigError for a selector that matches no rule. A preview rule runs only in
    preview mode, and there as `enabled_by_default` says; outside it no selector (ALL, a prefix, its code) runs it."""
    codes = known_codes()
    select_given = check_codes("--select", select, codes) if select is not None else None
    extend_all = (*config.extend_select, *check_codes("--extend-select", extend, codes))
    ignore_all = (*config.ignore, *check_codes("--ignore", ignore, codes))
    chosen = select_given if select_given is not None else config.select
    preview_mode = config.preview if preview is None else preview

    def enabled(info: RuleInfo) -> bool:
        on = matches(info.code, chosen) if chosen is not None else info.enabled_by_default
        return (on or matches(info.code, extend_all)) and not matches(info.code, ignore_all)

    enabled_rules: list[RuleSpec] = [rule for rule in registered_rules() if enabled(rule.info)]
    held_back = {rule for rule in enabled_rules if rule.info.preview and not preview_mode}
    named = {*(chosen or ()), *extend_all}
    # PFL000 stays whatever the selection, unless ignored: a file not parsed must not pass for a clean one.
    parse_errors_ignored = (PARSE_ERROR.code,) if matches(PARSE_ERROR.code, ignore_all) else ()
    return Selection(
        [rule for rule in enabled_rules if rule not in held_back],
        [rule.info.code for rule in enabled_rules if rule in held_back and rule.info.code in named],
        (*parse_errors_ignored, *(info.code for info in SUPPRESSION_CHECKS if not enabled(info))),
    )


def reported(diagnostics: Iterable[Diagnostic], path: str, config: Config, selection: Selection) -> list[Diagnostic]:
    """The findings of the file at `path` that its configuration lets through: its per-file-ignores take out any
    code, and the selection the engine's own codes it leaves out (PFL000 when ignored, the suppression checks when
    not selected), which the engine reports whatever rules run."""
    silenced = (*selection.left_out, *config.ignored_at(path))
    return [d for d in diagnostics if not matches(d.code, silenced)]
