"""What each file of a run is checked with, as Ruff does it in a monorepo: the rules, ignores and exclusions of the
configuration nearest the file (its `select`, `extend-select`, `ignore`, `preview`, `per-file-ignores`, `exclude`,
`extend-exclude`), with the command line's choices over every configuration.

What stays the run's, from its own configuration (`--config`, else the nearest to the current folder): the project
model's settings (`data-parallel`, `target-version`), `respect-gitignore` and the cache's folder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pitfall_lint.config import Config, ConfigResolver, anchored
from pitfall_lint.files import Excluder, FolderExcluder
from pitfall_lint.rules import registered_rules
from pitfall_lint.rules.registry import RuleSpec
from pitfall_lint.selection import Selection, selected_rules


@dataclass(frozen=True)
class CommandLineChoices:
    """What the command line chooses over every configuration (validated when a configuration is met)."""

    select: Sequence[str] | None = None  # given, even empty: replaces the configured one
    extend_select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    preview: bool | None = None
    exclude: Sequence[str] = ()  # given: replaces the configured one
    extend_exclude: Sequence[str] = ()


class PerFileSettings:
    """One run's settings for each of its files, worked out once per configuration; raises ConfigError where a
    configuration met is bad. `warn`: told once per code of a preview rule named while preview is off, as in Ruff."""

    def __init__(
        self, configs: ConfigResolver, choices: CommandLineChoices, respect_gitignore: bool, warn: Callable[[str], None]
    ) -> None:
        self.configs = configs
        self._choices = choices
        self._warn = warn
        self._warned: set[str] = set()
        self._selections: dict[int, Selection] = {}
        self._not_run: dict[int, tuple[str, ...]] = {}  # the codes of the rules each selection leaves out
        self._excluders: dict[int, Excluder] = {}
        # The command line's patterns match from the run's configuration's folder, whichever file they meet.
        self._exclude = anchored(choices.exclude, configs.fallback.root)
        self._extend_exclude = anchored(choices.extend_exclude, configs.fallback.root)
        self.excluder = FolderExcluder(lambda folder: self._excluder(configs.config_in(folder)), respect_gitignore)
        self.selection(configs.fallback)  # the run's own: its errors and warnings first, as before any file

    def selection(self, config: Config) -> Selection:
        found = self._selections.get(id(config))
        if found is None:
            choices = self._choices
            found = selected_rules(config, choices.select, choices.extend_select, choices.ignore, choices.preview)
            for code in found.preview_not_run:
                if code not in self._warned:
                    self._warned.add(code)
                    self._warn(f"{code} is a preview rule; add --preview to run it")
            self._selections[id(config)] = found
        return found

    def _excluder(self, config: Config) -> Excluder:
        found = self._excluders.get(id(config))
        if found is None:
            patterns = [*(self._exclude or config.exclude), *config.extend_exclude, *self._extend_exclude]
            found = self._excluders[id(config)] = Excluder(patterns, config.root, respect_gitignore=False)
        return found

    def rules_for(self, path: str) -> tuple[RuleSpec, ...]:
        return tuple(self.selection(self.configs.config_for(path)).rules)

    def rules_of(self, paths: Iterable[str]) -> list[RuleSpec]:
        """Every rule that some of these files run, in code order."""
        running = {rule for path in paths for rule in self.rules_for(path)}
        return [rule for rule in registered_rules() if rule in running]

    def silenced_for(self, path: str) -> tuple[str, ...]:
        """The codes not reported in this file: the rules its configuration leaves out, its per-file-ignores, and
        the engine's own codes left out."""
        config = self.configs.config_for(path)
        selection = self.selection(config)
        not_run = self._not_run.get(id(config))
        if not_run is None:
            not_run = tuple(rule.info.code for rule in registered_rules() if rule not in selection.rules)
            self._not_run[id(config)] = not_run
        return (*not_run, *selection.left_out, *config.ignored_at(path))
