"""One check over many files: each file's project found and modelled, cached results reused while they hold.

A file is always checked against its whole project (every Python file under the project root that the
configuration does not exclude, plus the files named), so `check one_file.py`, what pre-commit runs, gives
that file the diagnostics a run over the whole project gives it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pitfall_lint import pool
from pitfall_lint.cache import ResultCache
from pitfall_lint.config import Config, TargetVersion
from pitfall_lint.engine import Engine, FileResult
from pitfall_lint.files import Excluder, discover
from pitfall_lint.project.layout import find_project_root
from pitfall_lint.project.model import DataParallelMode, ProjectModel, still_answered
from pitfall_lint.project.store import SummaryStore
from pitfall_lint.rules.registry import RuleSpec


@dataclass(frozen=True)
class ProjectSettings:
    excluder: Excluder
    data_parallel: DataParallelMode = "auto"
    root: Path | None = None  # --project-root: one root for every file; else each file's nearest marker
    target: TargetVersion | None = None  # the projects' oldest Python, when known

    @classmethod
    def configured(cls, config: Config) -> ProjectSettings:
        """As the configuration alone sets them, with no command line to change them (the language server)."""
        excluder = Excluder([*config.exclude, *config.extend_exclude], config.root, config.respect_gitignore)
        return cls(excluder, config.data_parallel, None, config.target)  # type: ignore[arg-type]


@dataclass
class CheckRun:
    results: list[FileResult]
    projects: dict[str, ProjectModel] = field(default_factory=dict)  # by path as given
    contents: Mapping[str, bytes] = field(default_factory=dict)  # what stood in for a file on disk (stdin)


def project_root(path: str, settings: ProjectSettings, known: dict[str, Path | None] | None = None) -> Path | None:
    """The root of the project the file belongs to, None when it belongs to none (`known`: see find_project_root)."""
    return settings.root.resolve() if settings.root is not None else find_project_root(os.path.dirname(os.path.abspath(path)), known)


def _groups(paths: Sequence[str], settings: ProjectSettings) -> dict[Path | None, list[str]]:
    """The files of each project root; None holds the files that belong to no project."""
    groups: dict[Path | None, list[str]] = {}
    roots: dict[str, Path | None] = {}
    known: dict[str, Path | None] = {}
    for path in paths:
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in roots:
            roots[folder] = project_root(path, settings, known)
        groups.setdefault(roots[folder], []).append(path)
    return groups


def project_model(
    root: Path | None, members: Sequence[str], settings: ProjectSettings, store: SummaryStore, contents: dict[str, bytes] | None = None
) -> ProjectModel:
    """The model of a project: every file under its root not excluded, plus `members` (named on the command line);
    `contents` stand in for what is on disk of those files."""
    if root is None:  # no project around them: the files named are the project
        folder = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in members])
        return ProjectModel(folder, members, settings.data_parallel, store, contents, target=settings.target)
    # What the walk could not read is reported by the check of the files named, if at all: no second warning.
    documents: list[str] = []
    files = discover([str(root)], settings.excluder, lambda _: None, documents=documents)
    return ProjectModel(
        str(root), [*files, *members], settings.data_parallel, store, contents, target=settings.target, documents=documents
    )


@dataclass
class _Pending:
    """What a project's files to check need once their results come: the cache keys, and the project state the
    results hold for."""

    keys: dict[str, str | None]
    held: str


def check_paths(
    paths: Sequence[str],
    rules: Sequence[RuleSpec],
    settings: ProjectSettings,
    cache_root: Path,
    use_cache: bool,
    contents: Mapping[str, bytes] | None = None,
    store: SummaryStore | None = None,
) -> CheckRun:
    """Results in the order of `paths`. The files of every project share one pool: a small project found inside a
    large one (its own setup.py) is checked beside it, not after it. `contents`, by path as given, stand in for
    those files on disk (stdin read as a file, an editor's buffers): checked, and seen by their project, as they
    are, never cached. `store` keeps the summaries of the projects' files from one run to the next (the language
    server's, in memory); by default they are the cache's."""
    target = settings.target  # the syntax a file may use depends on it
    varying = [settings.data_parallel, [*target.version, target.source] if target is not None else None]
    cache = ResultCache(cache_root, [rule.info.code for rule in rules], varying) if use_cache else None
    store = store if store is not None else SummaryStore(cache.folder if cache is not None else None)
    run = CheckRun([], contents=contents or {})
    results: dict[str, FileResult] = {}
    pending: dict[str, _Pending] = {}
    checked_models: list[ProjectModel] = []  # the projects with files to check
    for root, members in _groups(paths, settings).items():
        given = {path: run.contents[path] for path in members if path in run.contents}
        model = project_model(root, members, settings, store, given)
        keys = {path: model.content_key(path) for path in members} if cache is not None else {}
        fingerprint = functools.cache(model.fingerprint)  # read from every file of the project: only when needed
        unchecked = []
        for path in members:
            run.projects[path] = model
            if path in given:  # checked here as it is, and never cached: its result is not the file's
                results[path] = Engine(rules).check_source(path, given[path], model)
                store.put_all(results[path].summaries)
                continue
            key = keys.get(path)
            cached = cache.get(path, key) if cache is not None and key is not None else None
            if cache is not None and cached is not None and (
                cache.holds_for(path) == fingerprint() or still_answered(model, cached.questions)
            ):
                cache.confirm(path, fingerprint())
                results[path] = cached
            else:
                unchecked.append(path)
        if unchecked:
            checked_models.append(model)
        store.put_all(model.take_fresh_summaries())
        # One file checked alone (a pre-commit run) reads no fingerprint of the whole project that nothing else
        # needed: its result holds for no known state of the project, and the next run asks its questions again.
        read_already = fingerprint.cache_info().currsize > 0
        held = fingerprint() if cache is not None and (len(unchecked) > 1 or read_already) else ""
        pending.update(dict.fromkeys(unchecked, _Pending(keys, held)))
    projects = {path: run.projects[path] for path in pending}
    # Where the files are spread over workers, what nearly every file of a project asks is answered once for each
    # worker before it checks a file, from summaries computed on all of them: those of every project of the run in
    # one pool (a monorepo's projects one after the other left the cores idle between rounds of a few files; a small
    # project found inside a large one had its answers worked out again on every worker).
    for result in pool.check_files(list(pending), rules, pool.available_cores(), projects, checked_models, store):
        store.put_all(result.summaries)
        results[result.path] = result
        wanted = pending[result.path]
        key = wanted.keys.get(result.path)
        if cache is not None and key is not None:
            cache.put(result.path, key, result, wanted.held)
    if cache is not None:
        cache.save()
    store.save()
    run.results = [results[p] for p in paths]
    return run


def check_by_rules(
    paths: Sequence[str],
    rules_for: Callable[[str], tuple[RuleSpec, ...]],
    settings: ProjectSettings,
    cache_root: Path,
    use_cache: bool,
    contents: Mapping[str, bytes] | None = None,
) -> CheckRun:
    """Each file with its own rules (those its configuration selects): one check per set of rules, the runs merged,
    results in the order of `paths`. A run with one configuration is one check."""
    groups: dict[tuple[RuleSpec, ...], list[str]] = {}
    for path in paths:
        groups.setdefault(rules_for(path), []).append(path)
    merged = CheckRun([], contents=contents or {})
    results: dict[str, FileResult] = {}
    for rules, members in groups.items():
        run = check_paths(members, rules, settings, cache_root, use_cache, contents)
        results.update((result.path, result) for result in run.results)
        merged.projects.update(run.projects)
    merged.results = [results[path] for path in paths]
    return merged
