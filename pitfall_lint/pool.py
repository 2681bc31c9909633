"""Files spread over the cores: each worker process owns one Engine and checks a share of the files, each file
against its own project (the files of several projects share one pool)."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from pitfall_lint.engine import Engine, FileResult
from pitfall_lint.interrupts import ctrl_c_held_back
from pitfall_lint.project.model import ProjectModel
from pitfall_lint.rules.registry import RuleSpec

if TYPE_CHECKING:
    from multiprocessing.pool import Pool

# Below this many files, starting workers costs more than it saves.
_MIN_FILES_PER_WORKER = 24
# The project of each file; a file without one is a project of its own.
Projects = Mapping[str, ProjectModel]
_worker: tuple[Engine, Projects] | None = None


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


@contextlib.contextmanager
def _pool(workers: int, rules: Sequence[RuleSpec], projects: Projects) -> Iterator[Pool]:
    import multiprocessing  # here: a run that checks few files never pays for the import

    for rule in rules:  # its module imported once, here, for every forked worker: not once in each
        rule.load()
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with contextlib.ExitStack() as stack:  # the pool is stopped (its workers killed) whatever ends the run
        # Ctrl-C waits while the workers start: the terminal sends it to every process of the group, and a worker
        # it reached before it could ignore it printed a KeyboardInterrupt traceback.
        with ctrl_c_held_back():
            yield stack.enter_context(context.Pool(workers, initializer=_start_worker, initargs=(tuple(rules), projects)))


def _chunks(paths: Sequence[str], workers: int) -> int:
    """Small chunks keep every worker busy to the end, whatever the sizes of the files."""
    return 8 if len(paths) > 16 * workers else 1


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
    with _pool(workers, rules, projects) as workers_pool:
        yield from workers_pool.imap(_check_in_worker, paths, chunksize=_chunks(paths, workers))


def summarize_in_rounds(
    first: Sequence[str], then: Callable[[], Sequence[str]], jobs: int, projects: Projects
) -> Iterator[dict[str, list]]:
    """The summaries of files of these projects (a file's summary is of the file alone: any project of it serves)
    computed on every core, round after round in one pool: `first`, then the files `then` names once the rows of
    the round before are in the projects' store (rows by content key, for the caller to store before it asks for the
    next round), until it names none that was not sent before (a file that cannot be parsed has no summary, and is
    named again)."""
    workers = min(jobs, len(first))
    with _pool(workers, (), projects) as workers_pool:
        sent: set[str] = set()
        paths = list(first)
        while paths:
            sent.update(paths)
            rows: dict[str, list] = {}
            for found in workers_pool.imap(_summarize_in_worker, paths, chunksize=_chunks(paths, workers)):
                rows.update(found)
            yield rows
            paths = [path for path in then() if path not in sent]
