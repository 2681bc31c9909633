"""Files spread over the cores: each worker process owns one Engine and checks a share of the files, each file
against its own project (the files of several projects share one pool)."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

from pitfall_lint.engine import Engine, FileResult
from pitfall_lint.interrupts import ctrl_c_held_back
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.rules.registry import RuleSpec

# Below this many files, starting workers costs more than it saves.
_MIN_FILES_PER_WORKER = 24
# The project of each file; a file without one is a project of its own.
Projects = Mapping[str, ProjectModel]
_worker: tuple[Engine, Projects] | None = None
T = TypeVar("T")


def _start_worker(rules: Sequence[RuleSpec], projects: Projects) -> None:
    """The parent answers Ctrl-C and SIGTERM (it stops the pool); a worker inheriting `verify`'s SIGTERM handler
    printed a KeyboardInterrupt traceback when the pool ended it. SIGINT comes blocked from the parent, which
    holds Ctrl-C back while it starts the workers: once ignored here, one that waited is dropped."""
    global _worker
    gc.freeze()  # what the parent built (the project model) is never garbage here: no collection reads it again
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker = (Engine(rules), projects)


def _summarize_in_worker(path: str) -> dict[str, list]:
    assert _worker is not None
    project = _worker[1][path]
    project.summary(path)
    return project.take_fresh_summaries()


def _check_in_worker(path: str) -> FileResult:
    assert _worker is not None
    engine, projects = _worker
    return engine.check_file(path, projects.get(path))


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(files: int, jobs: int) -> int:
    """How many workers check this many files (below 2: the files are checked in this process)."""
    return min(jobs, files // _MIN_FILES_PER_WORKER)


def _map(
    function: Callable[[str], T], paths: Sequence[str], workers: int, rules: Sequence[RuleSpec], projects: Projects
) -> Iterator[T]:
    import multiprocessing  # here: a run that checks few files never pays for the import

    for rule in rules:  # its module imported once, here, for every forked worker: not once in each
        rule.load()
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with contextlib.ExitStack() as stack:  # the pool is stopped (its workers killed) whatever ends the run
        # Ctrl-C waits while the workers start: the terminal sends it to every process of the group, and a worker
        # it reached before it could ignore it printed a KeyboardInterrupt traceback.
        with ctrl_c_held_back():
            workers_pool = stack.enter_context(context.Pool(workers, initializer=_start_worker, initargs=(tuple(rules), projects)))
        # Small chunks keep every worker busy to the end, whatever the sizes of the files.
        yield from workers_pool.imap(function, paths, chunksize=8 if len(paths) > 16 * workers else 1)


def check_files(
    paths: Sequence[str], rules: Sequence[RuleSpec], jobs: int, projects: Projects | None = None
) -> Iterator[FileResult]:
    """Results in the order of `paths`."""
    projects = projects or {}
    workers = worker_count(len(paths), jobs)
    if workers < 2:
        engine = Engine(rules)
        for path in paths:
            yield engine.check_file(path, projects.get(path))
        return
    yield from _map(_check_in_worker, paths, workers, rules, projects)


def summarize_files(paths: Sequence[str], jobs: int, project: ProjectModel) -> dict[str, list]:
    """The summaries of these files, computed on every core: rows by content key, for the project's store."""
    rows: dict[str, list] = {}
    for found in _map(_summarize_in_worker, paths, min(jobs, len(paths)), (), dict.fromkeys(paths, project)):
        rows.update(found)
    return rows
