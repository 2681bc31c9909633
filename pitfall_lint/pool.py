"""Files spread over the cores: each worker process owns one Engine and checks a share of the files."""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from pitfall_lint.engine import Engine, FileResult
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.rules.base import Rule

# Below this many files, starting workers costs more than it saves.
_MIN_FILES_PER_WORKER = 24
_worker: tuple[Engine, ProjectModel | None] | None = None
T = TypeVar("T")


def _start_worker(rules: Sequence[type[Rule]], project: ProjectModel | None) -> None:
    """The parent answers Ctrl-C and SIGTERM (it stops the pool); a worker inheriting `verify`'s SIGTERM handler
    printed a KeyboardInterrupt traceback when the pool ended it."""
    global _worker
    gc.freeze()  # what the parent built (the project model) is never garbage here: no collection reads it again
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker = (Engine(rules), project)


def _summarize_in_worker(path: str) -> dict[str, list]:
    assert _worker is not None and _worker[1] is not None
    project = _worker[1]
    project.summary(path)
    return project.take_fresh_summaries()


def _check_in_worker(path: str) -> FileResult:
    assert _worker is not None
    engine, project = _worker
    return engine.check_file(path, project)


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(files: int, jobs: int) -> int:
    """How many workers check this many files (below 2: the files are checked in this process)."""
    return min(jobs, files // _MIN_FILES_PER_WORKER)


def _map(
    function: Callable[[str], T], paths: Sequence[str], workers: int, rules: Sequence[type[Rule]], project: ProjectModel | None
) -> Iterator[T]:
    import multiprocessing  # here: a run that checks few files never pays for the import

    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with context.Pool(workers, initializer=_start_worker, initargs=(tuple(rules), project)) as workers_pool:
        # Small chunks keep every worker busy to the end, whatever the sizes of the files.
        yield from workers_pool.imap(function, paths, chunksize=8 if len(paths) > 16 * workers else 1)


def check_files(
    paths: Sequence[str], rules: Sequence[type[Rule]], jobs: int, project: ProjectModel | None = None
) -> Iterator[FileResult]:
    """Results in the order of `paths`. Without a project, each file is a project of its own."""
    workers = worker_count(len(paths), jobs)
    if workers < 2:
        yield from Engine(rules).check_files(paths, project)
        return
    yield from _map(_check_in_worker, paths, workers, rules, project)


def summarize_files(paths: Sequence[str], jobs: int, project: ProjectModel) -> dict[str, list]:
    """The summaries of these files, computed on every core: rows by content key, for the project's store."""
    rows: dict[str, list] = {}
    for found in _map(_summarize_in_worker, paths, min(jobs, len(paths)), (), project):
        rows.update(found)
    return rows
