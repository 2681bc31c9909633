"""What the language server knows of the open documents: their findings, as `check` finds them, with the editor's
buffers standing in for the files on disk, in their projects too (an edit of train.py changes what models/net.py
is told). Nothing here speaks the protocol."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pitfall_lint.checking import ProjectSettings, check_paths
from pitfall_lint.config import Config, ConfigError
from pitfall_lint.diagnostic import Diagnostic
from pitfall_lint.notebook import NOTEBOOK_SUFFIX
from pitfall_lint.project.layout import find_project_root
from pitfall_lint.project.store import SummaryStore
from pitfall_lint.selection import nearest_config, reported, selected_rules

# Summaries kept between checks: room for every file of a large project (a check reads far fewer: 29 of torch's
# 2,285 files for its data_parallel.py) and for the versions of the buffers typed since (one each).
_SUMMARIES_KEPT = 4096


@dataclass
class Findings:
    """The findings of each document checked, by path; one whose configuration cannot be read has none."""

    diagnostics: dict[str, list[Diagnostic]] = field(default_factory=dict)
    config_errors: list[str] = field(default_factory=list)  # one line each, as `check` prints them
    internal_errors: list[str] = field(default_factory=list)  # a bug of ours met in a file: its findings are lost


class RecentSummaries(SummaryStore):
    """The summaries in memory, the least recently used dropped past a bound: each version of a buffer typed adds
    one, and a day of typing must not fill the memory."""

    def __init__(self, limit: int) -> None:
        super().__init__(None)
        self._limit = limit
        self._recent: dict[str, list] = {}  # the most recent last

    def get(self, key: str) -> list | None:
        row = self._recent.pop(key, None)
        if row is not None:
            self._recent[key] = row
        return row

    def put_all(self, rows: dict[str, list]) -> None:
        for key, row in rows.items():
            self._recent.setdefault(key, row)
        for key in list(self._recent)[: max(len(self._recent) - self._limit, 0)]:
            del self._recent[key]


def project_of(path: str) -> Path | None:
    """The root of the project the file belongs to, as `check` finds it; None for a file of no project."""
    return find_project_root(os.path.dirname(path))


class Session:
    """One per server. The summaries of the projects' files are kept between checks, by content, so that a check
    after an edit summarises only what changed; the files not open are read from disk at each check, which is
    what keeps the model current when another tool changes them."""

    def __init__(self) -> None:
        self._store = RecentSummaries(_SUMMARIES_KEPT)

    def check(self, documents: Mapping[str, bytes]) -> Findings:
        """Each document (an absolute path -> its buffer) checked against its project, in which every buffer given
        stands in for its file. The documents are checked in groups that share a configuration: the nearest
        pyproject.toml with a [tool.pitfall-lint] table, as for `check`."""
        findings = Findings()
        groups: dict[Path | None, tuple[Config, list[str]]] = {}
        for path in documents:
            findings.diagnostics[path] = []
            if path.endswith(NOTEBOOK_SUFFIX):
                continue  # its findings are placed in cells, which a text document has not
            try:
                config = nearest_config(None, Path(path).parent)
            except ConfigError as error:
                if str(error) not in findings.config_errors:
                    findings.config_errors.append(str(error))
                continue
            groups.setdefault(config.source, (config, []))[1].append(path)
        for config, paths in groups.values():
            self._check_group(config, paths, documents, findings)
        return findings

    def _check_group(self, config: Config, paths: list[str], documents: Mapping[str, bytes], findings: Findings) -> None:
        selection = selected_rules(config, None, (), ())
        settings = ProjectSettings.configured(config)
        checked = [path for path in paths if not settings.excluder.excludes(path)]  # as `check --force-exclude`
        run = check_paths(checked, selection.rules, settings, config.root, False, {p: documents[p] for p in checked}, self._store)
        for result in run.results:
            if result.internal_error:
                findings.internal_errors.append(f"{result.path}: {result.internal_error}")
            findings.diagnostics[result.path] = reported(result.diagnostics, result.path, config, selection)
